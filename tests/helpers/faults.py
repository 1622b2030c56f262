"""Test-only callbacks that make one rank fail mid-training, to prove that the whole job then ends.

Each writes ``FOLDER/fault-rank{R}`` holding the wall-clock time of the fault just before it strikes,
so a test can time the job's end from the fault rather than from its start.
"""

import os
import signal
import time
from pathlib import Path

from lightning import Callback, LightningModule, Trainer


class Fault(Callback):
    """On rank ``rank``, at training step ``step``, does :meth:`strike`.

    Args:
        folder: where the ``fault-rank{R}`` time stamp goes.
        rank: the global rank that fails.
        step: the global step at whose start it fails.
        slow_start: seconds the rank sleeps in ``setup``, the others waiting for it in their next
            collective, as behind a slow file system.
    """

    def __init__(self, folder: str, rank: int = 1, step: int = 2, slow_start: float = 0.0) -> None:
        self.folder, self.rank, self.step, self.slow_start = Path(folder), rank, step, slow_start

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if trainer.global_rank == self.rank:
            time.sleep(self.slow_start)

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, batch_idx) -> None:
        self.strike_if_due(trainer)

    def strike_if_due(self, trainer: Trainer) -> None:
        """:meth:`strike`, on rank ``rank`` at step ``step``, after writing the time stamp."""
        if trainer.global_rank == self.rank and trainer.global_step == self.step:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / f"fault-rank{self.rank}").write_text(repr(time.time()))
            self.strike()

    def strike(self) -> None:
        raise NotImplementedError


class FaultRaise(Fault):
    """The rank raises an exception, as a bug in a training step would."""

    def strike(self) -> None:
        raise RuntimeError(f"fault injected on rank {self.rank} at step {self.step}")


class FaultKill(Fault):
    """The rank dies at once, as under the kernel's out-of-memory killer."""

    def strike(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class FaultKillAfterForward(FaultKill):
    """FaultKill once the rank's forward is done: the other ranks' next collective is DDP's gradient
    all-reduce, inside their backward."""

    def on_train_batch_start(self, *args) -> None:
        pass  # not at the step's start: after its forward

    def on_before_backward(self, trainer: Trainer, pl_module: LightningModule, loss) -> None:
        self.strike_if_due(trainer)


class FaultKillWorker(Fault):
    """The rank's DataLoader workers (its child processes; not rank 0's, which has rank 1 among them) die
    at once, as under the kernel's out-of-memory killer."""

    def strike(self) -> None:
        assert self.rank != 0, "rank 0's children include the other ranks"
        workers = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
        assert workers, "no DataLoader worker to kill"
        for worker in workers:
            os.kill(int(worker), signal.SIGKILL)


class FaultHang(Fault):
    """The rank stops answering and never returns, as on a deadlock or a stuck device."""

    def strike(self) -> None:
        while True:
            time.sleep(3600)
