"""A SIGTERM (a scheduler's preemption) to any one process of a job stops every rank at the same step.

Lightning's own SIGTERM handling acts on rank 0's signal only, and broadcasts from inside its signal
handler, out of step with the other ranks' collectives: a SIGTERM to another rank hangs the job until
the collective timeout. Here each process only notes the signal; at each step end the ranks agree
(one all-reduce) whether any of them got one, and then all save ``last.ckpt`` and stop together.
"""

import multiprocessing
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from lightning import Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch.multiprocessing import ProcessExitedException

STATUS = 128 + signal.SIGTERM  # what a shell reports for a process a SIGTERM stopped


class StopRequest:
    """A SIGTERM this process received while training, and the ranks' agreement on it."""

    def __init__(self) -> None:
        self.received = False
        self.before: Any = None

    def listen(self) -> None:
        """Note SIGTERMs from now on, in place of Lightning's handler (main thread only)."""
        self.received = False
        if threading.current_thread() is threading.main_thread():
            self.before = signal.signal(signal.SIGTERM, self._note)

    def close(self) -> None:
        """Give SIGTERM back to the handler it had before :meth:`listen`."""
        if self.before is not None:
            signal.signal(signal.SIGTERM, self.before)
            self.before = None

    def agreed(self, trainer: Trainer) -> bool:
        """Whether any rank received a SIGTERM; a collective: every rank calls it at the same step."""
        if trainer.world_size == 1:
            return self.received  # no tensor, no read back from the device at each step
        flag = torch.tensor(float(self.received), device=trainer.strategy.root_device)
        return bool(trainer.strategy.reduce(flag, reduce_op="sum") > 0)

    def _note(self, signum: int, frame: object) -> None:
        self.received = True


def stop() -> None:
    """End training on this rank, ``last.ckpt`` saved: as a SIGTERMException, which the CLI reports.

    A rank that ddp_spawn started is a multiprocessing child, where Lightning calls no
    ``on_exception`` and its launcher sees only an exit status: it exits with 143, which
    :func:`stopped` recognises in the launching process.
    """
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
    """While ``trainer`` runs, pass a SIGTERM to this process on to the ranks its launcher started.

    Under ddp_spawn this process only waits for its ranks: the SIGTERM a scheduler sends it would
    otherwise kill it at once, leaving the ranks to save alone, with no resume line.
    """
    launcher = trainer.strategy.launcher
    if launcher is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, lambda signum, frame: launcher.kill(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
