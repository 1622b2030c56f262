"""Test-only callbacks that stop or spoil a run at a chosen step, added from the command line."""

import math
import os
import signal
import time
from pathlib import Path

import torch
from lightning import Callback, LightningModule, Trainer


class SigtermAt(Callback):
    """Sends this process SIGTERM once ``step`` optimizer steps are done, as a scheduler would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *_) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


class SigintAt(Callback):
    """Sends this process SIGINT once ``step`` optimizer steps are done, as Ctrl-C in a terminal would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *_) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGINT)


class NanAt(Callback):
    """Makes one weight NaN just before the training step that starts after ``step`` steps.

    Args:
        step: the steps done before.
        rank: the only rank whose weight is spoiled; every rank's when None.
    """

    def __init__(self, step: int, rank: int | None = None) -> None:
        self.step, self.rank = step, rank

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, *_) -> None:
        if trainer.global_step == self.step and self.rank in (None, trainer.global_rank):
            with torch.no_grad():
                next(pl_module.parameters()).view(-1)[0] = math.nan


class SlowSteps(Callback):
    """Sleeps after every step, so that a test has time to kill training at a random moment.

    Args:
        seconds: the sleep.
        started: a file made when training starts (after start-up and any restore).
    """

    def __init__(self, seconds: float, started: str) -> None:
        self.seconds, self.started = seconds, Path(started)

    def on_train_start(self, *_) -> None:
        self.started.touch()

    def on_train_batch_end(self, *_) -> None:
        time.sleep(self.seconds)


class KillAt(Callback):
    """SIGKILLs this process once ``step`` optimizer steps are done, in a torchrun job's first attempt only.

    Args:
        step: the steps done before the kill.
        rank: the rank that dies.
    """

    def __init__(self, step: int, rank: int) -> None:
        self.step, self.rank = step, rank

    def on_train_batch_end(self, trainer: Trainer, *_) -> None:
        first = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
        if first and trainer.global_step == self.step and trainer.global_rank == self.rank:
            os.kill(os.getpid(), signal.SIGKILL)


class HoldOnce(Callback):
    """Holds the run at ``hook`` until the test deletes ``flag``, made there: the test acts at that
    point (kills a server). Once only: a run that finds ``flag.done`` passes.

    Args:
        hook: the Callback hook to hold at (``on_train_end``, ``on_predict_start`` ...).
        flag: the file made at the hook.
    """

    def __init__(self, hook: str, flag: str) -> None:
        self.flag, self.done = Path(flag), Path(f"{flag}.done")
        setattr(self, hook, self.hold)

    def hold(self, *_, **__) -> None:
        if self.done.exists():
            return
        self.done.touch()
        self.flag.touch()
        while self.flag.exists():
            time.sleep(0.05)
