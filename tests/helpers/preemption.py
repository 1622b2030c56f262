"""Test-only callbacks for a preempted DDP job: the SIGTERM a scheduler sends, and what each rank saved."""

import os
import signal
from pathlib import Path

from lightning import Callback, LightningModule, Trainer


class SigtermTo(Callback):
    """On global rank ``rank``, once ``step`` optimizer steps are done, sends SIGTERM to this rank's
    process, or to its launcher (``launcher``: the parent, which is rank 0 under ddp and the waiting
    main process under ddp_spawn)."""

    def __init__(self, step: int, rank: int = 1, launcher: bool = False) -> None:
        self.step, self.rank, self.launcher = step, rank, launcher

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *_) -> None:
        if trainer.global_rank == self.rank and trainer.global_step == self.step:
            os.kill(os.getppid() if self.launcher else os.getpid(), signal.SIGTERM)


class SaveLog(Callback):
    """Appends the step of every checkpoint a rank takes part in to ``FOLDER/saves-rank{R}``, and
    writes its process id to ``FOLDER/pid-rank{R}`` when training starts."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"pid-rank{trainer.global_rank}").write_text(str(os.getpid()))

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        with open(self.folder / f"saves-rank{trainer.global_rank}", "a") as f:
            f.write(f"{trainer.global_step}\n")
