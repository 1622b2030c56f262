"""Lightning's WandbLogger, without the argument that makes wandb warn on every run."""

from typing import Any

from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger


class WandbLogger(LightningWandbLogger):
    """Lightning's :class:`~lightning.pytorch.loggers.WandbLogger`; the CLI uses it wherever that is asked.

    Lightning always passes ``anonymous`` to ``wandb.init``, which wandb >= 0.19 answers with "The
    anonymous setting has no effect" on every run; it is passed only when set here.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._wandb_init.get("anonymous") is None:
            self._wandb_init.pop("anonymous", None)

    def finish(self) -> None:
        """End the W&B run now. Left to wandb's exit hook, its closing lines reach a log file with
        their terminal colour codes (the stream checks no longer work at interpreter exit)."""
        if self._experiment is not None:
            self._experiment.finish()
