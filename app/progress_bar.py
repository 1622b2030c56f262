"""Lightning's Rich progress bar, redrawn only every ``refresh_rate`` training steps."""

from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import RichProgressBar


class ThrottledRichProgressBar(RichProgressBar):
    """A :class:`RichProgressBar` that reads the metrics only when it redraws.

    Lightning's bar moves its counter every ``refresh_rate`` steps but reads the metrics at every
    step (Lightning-AI/pytorch-lightning issue 20300), and reading a logged tensor waits for the
    GPU: every step then stalls the CPU until the device is done instead of queueing the next one.
    """

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx):
        done = batch_idx + 1
        if done % self.refresh_rate == 0 or done == self.total_train_batches:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
