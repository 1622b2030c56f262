"""Every logger gets the training values at least once an epoch, however short the epoch."""

from lightning import Callback, LightningModule, Trainer


class LogEachEpoch(Callback):
    """At the end of an epoch in which Lightning logged no step (one shorter than
    ``log_every_n_steps``), logs the last step's values under ``prefix``, averaged over the ranks
    (Lightning sends a step's values to the loggers at its logging steps only).

    Args:
        prefix: the logged training values sent start with it.
    """

    def __init__(self, prefix: str = "train/") -> None:
        self.prefix, self.started_at = prefix, 0

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.started_at = trainer.global_step

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        every = trainer.log_every_n_steps
        if not every or self.started_at // every != trainer.global_step // every:
            return  # a step of this epoch was logged
        for key, value in list(trainer.callback_metrics.items()):
            if key.startswith(self.prefix):
                pl_module.log(key, value, sync_dist=True)
