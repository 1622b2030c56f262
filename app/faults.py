"""Faults of the machine met mid-run, each told in one ``error:`` line: what happened, and what to run."""

import os
import shlex
from pathlib import Path
from traceback import extract_tb

import torch.utils.data
import torchdata.stateful_dataloader

from app.runs.checkpoints import last_of
from app.runs.folder import RUN_DIR_ENV

# The packages of the DataLoaders (torch's for evaluation, torchdata's stateful one for training): a
# RuntimeError raised in their own code is the loader finding a worker process gone (torch raises no
# error type of its own for that).
LOADERS = tuple(
    str(Path(package.__file__).parent) + os.sep
    for package in (torch.utils.data, torchdata.stateful_dataloader)
)


def worker_died(err: BaseException) -> bool:
    """Whether ``err`` is a DataLoader's finding that one of its worker processes died."""
    if not isinstance(err, RuntimeError) or err.__traceback__ is None:
        return False
    if isinstance(err.__context__, OSError):  # its own "too many open files", which is not this
        return False
    return extract_tb(err.__traceback__)[-1].filename.startswith(LOADERS)


def resume_with(args: list[str]) -> str:
    """``resume with: COMMAND (from LAST.CKPT)`` for a run of ``python -m app ARGS`` that failed."""
    resume = shlex.join(["python", "-m", "app", *args, "--ckpt_path", "last"])
    run = os.environ.get(RUN_DIR_ENV)  # the run this process worked in, once it picked one
    last = last_of(run) if run else None
    since = f"from {last}" if last and last.is_file() else "from the start: nothing was saved yet"
    return f"resume with: {resume} ({since})"


def worker_died_line(args: list[str]) -> str:
    """What to tell the user when a loader worker died during ``python -m app ARGS``."""
    return (
        "a DataLoader worker process died, most likely killed by the kernel for want of memory (dmesg "
        f"says): pass a smaller --data.num_workers (or --data.batch_size); {resume_with(args)}"
    )


class StoreGone(Exception):
    """The store the data streams from stopped answering mid-run; the message is the data's line."""


def store_gone_line(err: StoreGone, args: list[str]) -> str:
    """What to tell the user when the data's store went away during ``python -m app ARGS``."""
    return f"{err}: it stopped answering mid-run; once it is back, {resume_with(args)}"
