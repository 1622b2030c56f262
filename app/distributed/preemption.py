"""A SIGTERM (a scheduler's preemption) or a SIGUSR1 (SLURM's warning before the time limit) to any one
process of a job stops every rank at the same step.

Lightning's own handler acts on rank 0's signal only, and broadcasts from inside it, out of step with
the other ranks' collectives: a SIGTERM to another rank hangs the job. Here each process only notes the
signal (``LastCheckpoint``); at each step end the ranks agree whether any of them got one, and then all
save ``last.ckpt`` and stop together. The agreement is a host collective on a gloo group, started at one
step and read at the next: it never waits for the GPU, and its round trip hides behind a step.
"""

import multiprocessing
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist
from lightning import Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch.multiprocessing import ProcessExitedException

STATUS = 128 + signal.SIGTERM  # what a shell reports for a process a SIGTERM stopped


class Agreement:
    """Which signal, if any, a rank received, agreed on by every rank at the same step.

    :meth:`poll` is a collective: every rank calls it at each step end. It starts an all-reduce (the
    largest signal number) of this step's signal and returns the previous step's result: a stop lands
    one step after the signal.
    """

    def __init__(self, timeout: timedelta | None = None) -> None:
        # Host tensors on a gloo group of their own: no device sync, and out of the way of the gradients'.
        self.group = dist.new_group(backend="gloo", timeout=timeout)
        self.flag, self.work = torch.zeros(1), None

    def poll(self, received: int, now: bool = False) -> int:
        """The signal (its number; 0: none) any rank had received by the previous step (by this one,
        with ``now``: the epoch's end, where no next step may come); starts this step's agreement."""
        asked = self._result()
        self.flag.fill_(received)
        self.work = dist.all_reduce(self.flag, op=dist.ReduceOp.MAX, group=self.group, async_op=True)
        return asked or (self._result() if now else 0)

    def _result(self) -> int:
        if self.work is None:
            return 0
        self.work.wait()
        self.work = None
        return int(self.flag.item())

    def finish(self) -> None:
        """Wait for the agreement in flight (every rank started it), so that none is left pending."""
        self._result()


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


# workaround: a SIGTERM kills a ddp_spawn launcher, its ranks left alone (Lightning 2.6); gone when forwarded
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
