"""The mistakes a user can fix, and the one way they are reported: one ``error:`` line, exit status 1."""

import os
import sys
import traceback
from pathlib import Path
from typing import NoReturn

import torch.distributed

from data import DataError
from models.errors import ModelError


class UsageError(Exception):
    """A problem the user can fix (a flag, the run folder, a checkpoint write, a diverged loss); the
    message, one line, says what to do."""


# DataError and ModelError are data/'s and models/' own (neither imports app/).
USER_ERRORS = (UsageError, DataError, ModelError)

# torch.distributed's own code: a RuntimeError raised there is a collective that failed (gloo raises no
# error type of its own for a peer that died).
DISTRIBUTED = str(Path(torch.distributed.__file__).parent) + os.sep


def fail(message: str, status: int = 1) -> NoReturn:
    """Print ``error: MESSAGE`` (whitespace folded to one line) on stderr and exit with ``status``."""
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    sys.exit(status)


def peer_gone(err: BaseException) -> bool:
    """Whether ``err`` is a collective of torch.distributed that failed: another process went away."""
    if not isinstance(err, RuntimeError) or err.__traceback__ is None:
        return False
    innermost = traceback.extract_tb(err.__traceback__)[-1]
    return innermost.filename.startswith(DISTRIBUTED)
