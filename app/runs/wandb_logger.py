"""Lightning's WandbLogger, without the arguments that make wandb warn on every run."""

from typing import Any

from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger

from app import internals
from app.runs.loggers import sweep_trial


class WandbLogger(LightningWandbLogger):
    """Lightning's :class:`~lightning.pytorch.loggers.WandbLogger`, quieter; the default logger.

    Lightning always passes ``anonymous`` to ``wandb.init``, which wandb >= 0.19 answers with "The
    anonymous setting has no effect" on every run; it is passed only when set here. Under a sweep
    agent, wandb takes the project, entity and run id from the agent and warns about any given.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        init = internals.wandb_init_kwargs(self)
        if init.get("anonymous") is None:
            init.pop("anonymous", None)
        trial = sweep_trial()
        if trial:
            for key in ("project", "entity", "id"):
                init.pop(key, None)
            internals.set_wandb_id(self, trial[1])
