"""The private names of Lightning, jsonargparse and torch.distributed this project reaches, one function each.

A name added here has no public counterpart in a release ``pyproject.toml`` allows; its comment names
the upstream request for one, and ``tests/app/test_internals.py`` checks that it still works, so a
release that renames it fails there, named, rather than in a user's run.
"""

from datetime import timedelta

import torch.distributed as dist


def set_collective_timeout(timeout: timedelta) -> None:
    """Set how long the default process group's collectives wait, after the group is made.

    ``torch.distributed.set_timeout`` from torch 2.14 (pytorch pull request 187387 made the private
    ``distributed_c10d._set_pg_timeout`` of torch 2.3 to 2.13 public, and deprecated it).
    """
    public = getattr(dist, "set_timeout", None)
    if public is not None:
        public(timeout)
    else:
        dist.distributed_c10d._set_pg_timeout(timeout)
