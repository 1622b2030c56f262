"""The mistakes a user can fix, and the one way they are reported: one ``error:`` line, exit status 1."""

import sys
from typing import NoReturn

from data import DataError
from models.errors import ModelError


class UserError(Exception):
    """A problem the user can fix; the message, one line, says what to do."""


class UsageError(UserError):
    """A flag or config value that cannot work; the message says which."""


class RunFolderError(UserError):
    """The run folder cannot be made or written; the message says which and why."""


class CheckpointWriteError(UserError):
    """A checkpoint could not be written; the previous file at that path is untouched."""


class LossNotFiniteError(UserError):
    """The training loss diverged; the message gives the step and the last good checkpoint."""


# DataError and ModelError are data/'s and models/' own (neither imports app/).
USER_ERRORS = (UserError, DataError, ModelError)

# What torch.distributed says when a peer process died or left: not this process's own error.
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


def fail(message: str, status: int = 1) -> NoReturn:
    """Print ``error: MESSAGE`` (whitespace folded to one line) on stderr and exit with ``status``."""
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    sys.exit(status)


def peer_gone(err: BaseException) -> bool:
    """Whether ``err`` only says that another process of the job went away."""
    return isinstance(err, RuntimeError) and any(sign in str(err) for sign in PEER_GONE)
