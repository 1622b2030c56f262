"""The mistakes a user can fix, and the one way they are reported: one ``error:`` line, exit status 1."""

import errno
import os
import sys
import traceback
from pathlib import Path
from typing import NoReturn

import torch.distributed
import torch.utils.data
import torchdata.stateful_dataloader

from data import DataError
from models.errors import ModelError


class UsageError(Exception):
    """A problem the user can fix (a flag, the run folder, a checkpoint write, a diverged loss); the
    message, one line, says what to do."""


# DataError and ModelError are data/'s and models/' own (neither imports app/).
USER_ERRORS = (UsageError, DataError, ModelError)

# Where torch raises a RuntimeError of no type of its own for a fault: torch.distributed's code and, in a
# job of several processes, DDP's and autograd's (DDP's collectives), for a peer gone; the DataLoaders'
# (torch's for evaluation, torchdata's stateful one for training), for a worker process gone.
DISTRIBUTED = str(Path(torch.distributed.__file__).parent) + os.sep
DDP_STEP = tuple(str(Path(p.__file__).parent) + os.sep for p in (torch.nn.parallel, torch.autograd))
LOADERS = tuple(
    str(Path(p.__file__).parent) + os.sep for p in (torch.utils.data, torchdata.stateful_dataloader)
)


def fail(message: str, status: int = 1) -> NoReturn:
    """Print ``error: MESSAGE`` (whitespace folded to one line) on stderr and exit with ``status``."""
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    sys.exit(status)


def raised_in(err: BaseException, *folders: str) -> bool:
    """Whether ``err`` is a RuntimeError raised in the code under ``folders`` (DISTRIBUTED, LOADERS)."""
    if not isinstance(err, RuntimeError) or err.__traceback__ is None:
        return False
    *_, (innermost, _) = traceback.walk_tb(err.__traceback__)  # frames only: no source file is read
    # A loader's "too many open files" (EMFILE) is no worker gone; a reset connection (killed mid-send) is.
    emfile = isinstance(err.__context__, OSError) and err.__context__.errno == errno.EMFILE
    return innermost.f_code.co_filename.startswith(folders) and not emfile


def in_collective(err: BaseException) -> bool:
    """Whether ``err`` was raised where the processes of a job wait on each other."""
    several = torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1
    return raised_in(err, DISTRIBUTED) or (several and raised_in(err, *DDP_STEP))
