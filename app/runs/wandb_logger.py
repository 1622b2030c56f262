"""Lightning's WandbLogger, without the arguments that make wandb warn on every run."""

from typing import Any

from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger

from app.runs.loggers import sweep_trial


class WandbLogger(LightningWandbLogger):
    """Lightning's :class:`~lightning.pytorch.loggers.WandbLogger`; the CLI uses it wherever that is asked.

    Lightning always passes ``anonymous`` to ``wandb.init``, which wandb >= 0.19 answers with "The
    anonymous setting has no effect" on every run; it is passed only when set here. Under a sweep
    agent, wandb takes the project, entity and run id from the agent and warns about any given.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._wandb_init.get("anonymous") is None:
            self._wandb_init.pop("anonymous", None)
        trial = sweep_trial()
        if trial:
            for key in ("project", "entity", "id"):
                self._wandb_init.pop(key, None)
            self._id = trial[1]

    def finish(self) -> None:
        """End the W&B run now. Left to wandb's exit hook, its closing lines reach a log file with
        their terminal colour codes (the stream checks no longer work at interpreter exit)."""
        if self._experiment is not None:
            self._experiment.finish()
