"""A SIGTERM (a scheduler's preemption) to any one process of a job stops every rank at the same step.

Lightning's own handler acts on rank 0's signal only, and broadcasts from inside it, out of step with
the other ranks' collectives: a SIGTERM to another rank hangs the job. Here each process only notes the
signal (``LastCheckpoint``); at each step end the ranks agree (one all-reduce) whether any of them got
one, and then all save ``last.ckpt`` and stop together.
"""

import multiprocessing
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from lightning import Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch.multiprocessing import ProcessExitedException

STATUS = 128 + signal.SIGTERM  # what a shell reports for a process a SIGTERM stopped


def any_rank(trainer: Trainer, received: bool) -> bool:
    """Whether any rank received a SIGTERM; a collective: every rank calls it at the same step."""
    if trainer.world_size == 1:
        return received  # no tensor, no read back from the device at each step
    flag = torch.tensor(float(received), device=trainer.strategy.root_device)
    return bool(trainer.strategy.reduce(flag, reduce_op="sum") > 0)


def stop() -> None:
    """End training on this rank, ``last.ckpt`` saved: a SIGTERMException, which the CLI reports; a
    rank that ddp_spawn started (no ``on_exception`` there) exits with 143, which :func:`stopped` reads."""
    if multiprocessing.parent_process() is not None:
        sys.exit(STATUS)
    raise SIGTERMException


def stopped(err: BaseException) -> bool:
    """Whether ``err`` ended training for a SIGTERM, here or in a rank that ddp_spawn started."""
    if isinstance(err, ProcessExitedException):
        return err.exit_code == STATUS
    return isinstance(err, SIGTERMException)


@contextmanager
def forwarded_to_ranks(trainer: Trainer) -> Iterator[None]:
    """While ``trainer`` runs, pass a SIGTERM to this process on to the ranks its launcher started (under
    ddp_spawn it would kill this process at once, the ranks left to save alone, with no resume line)."""
    launcher = trainer.strategy.launcher
    if launcher is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, lambda signum, frame: launcher.kill(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
