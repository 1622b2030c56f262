"""A callback that writes down, in every rank, the recipe that rank trains with."""

import json
from pathlib import Path

from lightning import Callback, LightningModule, Trainer

from app.runs.folder import run_folder


class RecipeProbe(Callback):
    """Writes ``FOLDER/rank{R}.json`` when training starts: the module's hyperparameters, what its
    optimizer and schedule were built with, and the DataModule's batch size.

    Args:
        folder: where the files go; None: the run folder's ``recipe/``.
    """

    def __init__(self, folder: str | None = None) -> None:
        self.folder = Path(folder) if folder else None

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        (group,) = trainer.optimizers[0].param_groups
        seen = {
            "hparams": {k: v for k, v in pl_module.hparams.items() if isinstance(v, int | float | str)},
            "optimizer": {"initial_lr": group["initial_lr"], "weight_decay": group["weight_decay"]},
            "warmup_ratio": pl_module.scheduler.keywords.get("warmup_ratio"),
            "batch_size": trainer.datamodule.batch_size,
            "world_size": trainer.world_size,
        }
        folder = self.folder or run_folder(trainer) / "recipe"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"rank{trainer.global_rank}.json").write_text(json.dumps(seen))
