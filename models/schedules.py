"""The default lr schedule, and the type of ``--model.scheduler``."""

from typing import Protocol

from jsonargparse.typing import ClosedUnitInterval, restricted_number_type
from torch.optim import Optimizer
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, LRScheduler, SequentialLR

# A fraction that may be 0 but not 1; the CLI's parser refuses other values.
RightOpenUnitInterval = restricted_number_type(
    "RightOpenUnitInterval", float, [(">=", 0.0), ("<", 1.0)], docstring="A float in [0, 1)."
)
# A schedule's length, under the names torch's schedulers give it: filled in from the Trainer.
LENGTHS = ("total_steps", "T_max", "total_iters")


class SchedulerCallable(Protocol):
    """``--model.scheduler``: any LR scheduler class, given the optimizer and, where it takes one, its
    length (``total_steps``, ``T_max`` or ``total_iters``: steps or epochs, as ``scheduler_interval``
    says). jsonargparse leaves these keyword names out of the options: a user never types a step count."""

    def __call__(
        self,
        optimizer: Optimizer,
        /,
        *,
        total_steps: int,
        T_max: int,
        total_iters: int,
        epochs: int,
        steps_per_epoch: int,
    ) -> LRScheduler: ...


class WarmupCosineLR(SequentialLR):
    """An optional linear warmup, then a cosine from the peak lr down to ``final_lr_ratio`` x it.

    The example MNIST script's schedule; its lr values match those of torch's LinearLR and
    CosineAnnealingLR chained by hand.

    Args:
        optimizer: the optimizer; its first group's lr is the peak.
        total_steps: the schedule's length (the run's, filled in by the model).
        warmup_ratio: fraction of the steps, in [0, 1), over which lr rises linearly to its peak.
        final_lr_ratio: lr at the last step, as a fraction of the peak, in [0, 1].
    """

    def __init__(
        self,
        optimizer: Optimizer,
        total_steps: int,
        warmup_ratio: RightOpenUnitInterval = 0.0,
        final_lr_ratio: ClosedUnitInterval = 0.1,
    ) -> None:
        self.warmup = min(int(warmup_ratio * total_steps), total_steps - 1)
        peak = optimizer.param_groups[0]["lr"]
        cosine = CosineAnnealingLR(optimizer, T_max=total_steps - self.warmup, eta_min=peak * final_lr_ratio)
        if self.warmup:
            rise = LinearLR(optimizer, start_factor=1 / (self.warmup + 1), total_iters=self.warmup)
            super().__init__(optimizer, [rise, cosine], milestones=[self.warmup])
        else:
            super().__init__(optimizer, [cosine], milestones=[])

    def set_length(self, total_steps: int) -> None:
        """End at ``total_steps`` instead: the cosine goes on from the lr it is at to its floor there."""
        self._schedulers[-1].T_max = max(1, total_steps - self.warmup)
