"""The private names of Lightning, jsonargparse and torch.distributed the core reaches, one function each
(an optional part keeps its own in its ``internals.py``).

A name added here has no public counterpart in a release ``pyproject.toml`` allows; its comment names
the upstream request for one, and ``tests/app/test_internals.py`` checks that it still works, so a
release that renames it fails there, named, rather than in a user's run.
"""

from datetime import timedelta

import torch.distributed as dist


# workaround: pytorch pull request 187387; gone when torch >= 2.14 is the floor (set_timeout)
def set_collective_timeout(timeout: timedelta) -> None:
    """Set the default group's collective timeout after the group is made: ``torch.distributed.set_timeout``
    from torch 2.14, the private name it made public before (pytorch pull request 187387)."""
    (getattr(dist, "set_timeout", None) or dist.distributed_c10d._set_pg_timeout)(timeout)
