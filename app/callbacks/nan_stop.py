"""Stop training after a NaN or infinite loss, before any checkpoint holds the spoiled weights."""

import functools
from typing import Any

import torch
import torch.distributed as dist
from jsonargparse.typing import PositiveInt
from lightning import Callback, LightningModule, Trainer

from app.errors import UsageError
from app.runs.checkpoints import last_of
from models import is_log_step
from models.log_step_read import LogStepRead

NONE = 2**62  # no bad loss
FOLD_EVERY = 256  # losses kept at most between two reads


class StopOnNonFiniteLoss(Callback):
    """Raises :class:`UsageError` on every rank once a training loss was not finite.

    Each step's loss stays on the device. At the steps Lightning logs, after backward, its state is
    read with the step's logged loss in the model's one read (``log_step_read``: one wait for the
    device a logging step, none between them); at epoch ends and before any checkpoint is written,
    at once: no file holds a bad step. Several ranks agree on the first bad step by one all-reduce on
    the device; one rank reduces nothing.

    Args:
        check_every_n_steps: steps between reads; None: Lightning's ``log_every_n_steps``.
    """

    def __init__(self, check_every_n_steps: PositiveInt | None = None) -> None:
        self.every = check_every_n_steps
        self.steps: list[int] = []  # of each loss since the last check
        self.losses: list[torch.Tensor] = []  # the last of them, not yet folded
        self.first_bad: torch.Tensor | None = None  # index in steps of the first bad loss folded, or NONE
        self.bad_loss: torch.Tensor | None = None

    def on_before_backward(self, trainer: Trainer, pl_module: LightningModule, loss: torch.Tensor) -> None:
        # Before any on_train_batch_end, so that no callback can save this step before it is recorded.
        self.losses.append(loss.detach())
        self.steps.append(trainer.global_step + 1)
        if len(self.losses) == FOLD_EVERY:
            self._fold()

    def on_before_optimizer_step(self, trainer: Trainer, pl_module: LightningModule, optimizer) -> None:
        if is_log_step(trainer, self.every):
            self.check(trainer, getattr(pl_module, "log_step_read", None))

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.check(trainer)

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]):
        self.check(trainer)

    def _fold(self) -> None:
        """Fold the kept losses into ``first_bad`` and ``bad_loss``, on their device (no sync)."""
        if not self.losses:
            return
        # A loss is one number (backward needs one), shaped () or (1,).
        losses = torch.stack(self.losses).reshape(len(self.losses), -1).float()
        bad = ~torch.isfinite(losses).all(dim=1)
        i = bad.int().argmax()  # the first bad one, where there is one
        at = torch.where(bad[i], i + (len(self.steps) - len(self.losses)), NONE)
        if self.first_bad is None:
            self.first_bad, self.bad_loss = at, losses[i].sum()
        else:
            self.bad_loss = torch.where(self.first_bad == NONE, losses[i].sum(), self.bad_loss)
            self.first_bad = torch.minimum(self.first_bad, at)
        self.losses = []

    def check(self, trainer: Trainer, reader: LogStepRead | None = None) -> None:
        """Raise on every rank if any rank saw a bad loss since the last check (on several ranks, a
        collective call): now, or once ``reader`` reads, with the other values it reads."""
        self._fold()
        if self.first_bad is None:
            return
        mine, first = self.first_bad, self.first_bad
        if trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
            # Every rank keeps the same steps: the lowest index is the first bad step of any rank.
            # torch's all-reduce is queued on the device; Lightning's reduce waits at a barrier first.
            first = mine.clone()
            dist.all_reduce(first, op=dist.ReduceOp.MIN)
        state = torch.stack([first.double(), mine.double(), self.bad_loss.double()])
        receive = functools.partial(self._raise_if_bad, trainer, self.steps)
        self.steps, self.first_bad = [], None
        if reader is None:
            receive(state.tolist())
        else:
            reader.want(state, receive)

    def _raise_if_bad(self, trainer: Trainer, steps: list[int], state: list[float]) -> None:
        first, mine, bad_loss = state
        if first == NONE:
            return
        value = f"{bad_loss}" if mine == first else "not finite on another rank"
        f = last_of(trainer.default_root_dir)
        kept = f"the last good checkpoint is {f}" if f.is_file() else "no checkpoint was saved before it"
        raise UsageError(
            f"the training loss is {value} at step {steps[int(first)]}; {kept}; "
            "lower --model.optimizer.lr (or check the data) and resume with --ckpt_path last"
        )
