"""The private names of Lightning, jsonargparse and torch.distributed this project reaches, one function each.

None today. A name added here has no public counterpart in a release ``pyproject.toml`` allows; its
comment names the upstream request for one, and ``tests/app/test_internals.py`` checks that it still
works, so a release that renames it fails there, named, rather than in a user's run.
"""

from datetime import timedelta

import torch.distributed as dist


def set_collective_timeout(timeout: timedelta) -> None:
    """Set the default process group's timeout for the collectives that follow."""
    # Public from torch 2.14, pyproject's lower bound. Tested by tests/app/distributed/test_no_hangs.py.
    dist.set_timeout(timeout)
