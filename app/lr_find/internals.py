"""The private name of Lightning this part reaches (see ``app/internals.py``)."""

from lightning import Trainer


# workaround: lightning issue 8983; gone when Lightning names its launcher's kind publicly
def spawns_ranks(trainer: Trainer) -> bool:
    """Whether ``trainer``'s launcher runs the ranks in processes it starts from this one (``ddp_spawn``,
    ``ddp_fork``, XLA) rather than being rank 0 itself: Lightning's ``_MultiProcessingLauncher``, which it
    names nowhere publicly. Its ``Tuner`` ends a range test with an exception that such a rank leaves
    uncaught (lightning issue 8983 reports ``lr_find`` under ``ddp_spawn`` failing)."""
    from lightning.pytorch.strategies.launchers.multiprocessing import _MultiProcessingLauncher

    return isinstance(trainer.strategy.launcher, _MultiProcessingLauncher)
