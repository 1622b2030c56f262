"""The private names of Lightning, jsonargparse and torch.distributed this project reaches, one function each.

Each has no public counterpart in a release ``pyproject.toml`` allows; its comment names the upstream
request for one, and ``tests/app/test_internals.py`` checks that it still works, so a release that renames
it fails there, named, rather than in a user's run.
"""

from datetime import timedelta

import torch.distributed as dist


def set_collective_timeout(timeout: timedelta) -> None:
    """Set the default process group's timeout for the collectives that follow."""
    # torch.distributed.set_timeout is public from torch 2.14 on (pytorch/pytorch pull request 187387,
    # which deprecates the private _set_pg_timeout that older releases have). Gone once pyproject asks for
    # torch >= 2.14. Tested by tests/app/distributed/test_no_hangs.py.
    set_timeout = getattr(dist, "set_timeout", None) or dist.distributed_c10d._set_pg_timeout
    set_timeout(timeout)
