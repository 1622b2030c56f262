"""``predict`` writes ``predictions.csv`` (a later one ``predictions-2.csv`` ...) in the run folder."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch.distributed as dist
from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor

from app.runs import folder
from app.runs.folder import run_folder
from data.contract import provided

FILE_NAME = "predictions.csv"


class PredictionsWriter(BasePredictionWriter):
    """Writes each sample's predicted class, its name and its probability to ``predictions.csv``.

    Rows are gathered on rank 0 at the end; the first column is the DataModule's ``predict_id``
    (``index``, or an image folder's ``file``). ``predict_step`` returns class probabilities.
    """

    def __init__(self) -> None:
        super().__init__(write_interval="batch")
        self.rows: list[tuple[int, int, float]] = []

    def on_predict_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.rows = []

    def write_on_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        prediction: Tensor,
        batch_indices: Sequence[int] | None,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        if not batch_indices:
            raise RuntimeError(
                "predictions.csv needs the sample index of each prediction, which Lightning gives only "
                "for a torch DataLoader: make the DataModule's predict_dataloader return one"
            )
        probability, predicted = prediction.detach().float().max(dim=1)
        self.rows += zip(batch_indices, predicted.tolist(), probability.tolist(), strict=True)

    def on_predict_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        rows = self.rows
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            shards = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
            dist.gather_object(rows, shards, dst=0)
            rows = [row for shard in shards or [] for row in shard]
        self.rows = []
        if trainer.is_global_zero:
            # The checkpoint's class names: those the network learnt, even where the data is gone.
            names = (getattr(pl_module, "data_card", None) or {}).get("class_names")
            path = write(run_folder(trainer) / FILE_NAME, sorted(rows), trainer.datamodule, names)
            rank_zero_info(f"done: {len(rows)} predictions in {path}")


def write(
    path: Path, rows: list[tuple[int, int, float]], datamodule: Any, names: Sequence[str] | None = None
) -> Path:
    """Write ``rows`` (index, class, probability) as CSV (``folder.write_csv``); the path written."""
    names = names or provided(datamodule, "class_names")
    id_name = provided(datamodule, "predict_id_name", "index")
    name_of = provided(datamodule, "predict_id", lambda i: i)
    return folder.write_csv(
        path,
        [id_name, "class", "class_name", "probability"],
        (
            [name_of(i), k, names[k] if names and k < len(names) else str(k), f"{probability:.6f}"]
            for i, k, probability in rows
        ),
    )
