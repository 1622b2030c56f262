"""Optional part: ``python -m app lr_find``, an lr range test of the run's own recipe, data and strategy.

To drop it: ``rm -r app/lr_find tests/app/lr_find`` and its line in ``app/trainer.py``.
"""

from typing import Literal

from jsonargparse.typing import PositiveFloat, PositiveInt
from lightning import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.tuner import Tuner
from lightning.pytorch.utilities import rank_zero_info

from app.errors import UsageError
from app.lr_find.internals import spawns_ranks
from app.lr_find.report import write
from models import optimization

LR_FLAG = "--model.optimizer.lr"
# What Lightning's suggestion leaves out of the curve, given here so that --num_training can be checked.
SKIP_BEGIN, SKIP_END = 10, 1


def lr_find(
    trainer: Trainer,
    model: LightningModule,
    datamodule: LightningDataModule,
    min_lr: PositiveFloat = 1e-8,
    max_lr: PositiveFloat = 1.0,
    num_training: PositiveInt = 100,
    mode: Literal["exponential", "linear"] = "exponential",
    early_stop_threshold: PositiveFloat | None = 4.0,
) -> float | None:
    """Run an lr range test (Lightning's ``Tuner.lr_find``) and suggest the lr to train with.

    The run's optimizer (its class and every argument but the lr), parameter groups, data, strategy and
    world size train for ``num_training`` steps while the lr grows from ``min_lr`` to ``max_lr``; the
    run's schedule is set aside meanwhile, and the weights are put back after. Rank 0 writes the loss
    against the lr to ``lr_find.png`` and ``lr_find.csv`` in the run folder, and prints the suggestion
    (the lr where the loss falls fastest) as the ``--model.optimizer.lr`` to train with: the lr
    before ``--model.lr_scaling`` scales it to the world size.

    Args:
        trainer: the Trainer (this is its ``lr_find`` method).
        model: the classifier, built from the run's config.
        datamodule: the training data.
        min_lr: the lr of the first step.
        max_lr: the lr of the last step.
        num_training: steps in the test; the run's ``--trainer.max_epochs`` may end it sooner.
        mode: how the lr grows from step to step.
        early_stop_threshold: stop once the smoothed loss exceeds this times its lowest; None: never.

    Returns:
        The suggested ``--model.optimizer.lr``; None where the test gave too few losses.
    """
    if trainer.fast_dev_run:
        raise UsageError("lr_find runs no range test with --trainer.fast_dev_run: drop the flag")
    if spawns_ranks(trainer):
        raise UsageError(
            "lr_find cannot run under a strategy that spawns its processes (ddp_spawn, ddp_fork): "
            "Lightning's range test fails in spawned ranks; use --trainer.strategy ddp (the same training)"
        )
    if min_lr >= max_lr:
        raise UsageError(f"--min_lr {min_lr:g} must be below --max_lr {max_lr:g}")
    if num_training < SKIP_BEGIN + SKIP_END + 2:
        raise UsageError(
            f"--num_training {num_training} is too few: the suggestion leaves out the first {SKIP_BEGIN} "
            f"steps and the last {SKIP_END}; pass at least {SKIP_BEGIN + SKIP_END + 2}"
        )
    if model.scaled_lr(1) is None:
        name = getattr(optimization.class_of(model.optimizer), "__name__", "")
        raise UsageError(f"--model.optimizer {name} takes no lr: there is nothing to test")
    trainer.loggers = []  # the test's values are the plot and the line, not a run's metrics
    finder = Tuner(trainer).lr_find(
        model,
        datamodule=datamodule,
        min_lr=min_lr,
        max_lr=max_lr,
        num_training=num_training,
        mode=mode,
        early_stop_threshold=early_stop_threshold,
        update_attr=False,
    )
    lr = finder.suggestion(skip_begin=SKIP_BEGIN, skip_end=SKIP_END)
    lrs = finder.results["lr"]
    paths = write(trainer, finder) if trainer.is_global_zero else []
    span = f" from lr {lrs[0]:.1e} to {lrs[-1]:.1e}" if lrs else ""
    ended = "" if len(lrs) == num_training else f", ended before --num_training {num_training}"
    rank_zero_info(
        f"lr_find: {len(lrs)} steps{span}{ended}; loss against lr in {' and '.join(map(str, paths))}"
    )
    if lr is None:
        # Not an error line: that would remove the run folder, whose plot shows why.
        rank_zero_info(
            "lr_find: no suggestion: too few finite losses; where the data ran out first, pass a larger "
            "--trainer.max_epochs"
        )
        return None
    # The test ran at the lr the run's scaling gives its world size; the flag takes the lr before it.
    factor = model.lr_factor(trainer.world_size, trainer.accumulate_grad_batches)
    base = lr / factor
    scaled = f" ({lr:.1e} in the test / {factor:g}, its --model.lr_scaling)" if factor != 1 else ""
    rank_zero_info(f"lr_find: suggested lr {base:.1e}{scaled}; use it with {LR_FLAG} {base:.1e}")
    return base
