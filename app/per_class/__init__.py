"""Each test ends with a per-class table: on the console, in ``RUN/test-per-class.csv`` and in W&B."""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch import Tensor
from torchmetrics.classification import MulticlassStatScores

from app.runs import folder
from app.runs.folder import run_folder
from data.contract import provided

FILE_NAME = "test-per-class.csv"
COLUMNS = ["class", "class_name", "support", "precision", "recall", "f1"]


class PerClassTable(Callback):
    """Support, precision, recall and F1 of each class, over the test samples of all ranks.

    When a test ends (``test``, and fit's final test), rank 0 prints the table, writes it to
    ``test-per-class.csv`` in the run folder (a later test of the same run writes
    ``test-per-class-2.csv``, ...: none replaces another's) and logs it to W&B as the table
    ``test/per_class`` when a W&B logger runs. The model's ``test_step`` returns
    ``{"preds": class indices}``; class names are the checkpoint's, else the DataModule's.

    Args:
        print_rows: most classes printed; beyond, the ``print_rows`` lowest F1 (the file has them all).
    """

    def __init__(self, print_rows: int = 30) -> None:
        self.print_rows = print_rows
        self.scores: MulticlassStatScores | None = None

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        # The model's class count (a checkpoint's, where the data is gone), else the DataModule's.
        hparams, data = pl_module.hparams, trainer.datamodule
        classes = getattr(hparams, "num_classes", None) or provided(data, "num_classes")
        if self.scores is None and classes:
            self.scores = MulticlassStatScores(classes, average=None)

    def on_test_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.scores is not None:
            self.scores.to(pl_module.device)
            self.scores.reset()

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self.scores is None:
            return
        preds = outputs.get("preds") if isinstance(outputs, Mapping) else None
        if preds is None:
            rank_zero_warn("PerClassTable: test_step returns no {'preds': ...}; no per-class table")
            self.scores = None  # every rank gets the same outputs, so all stop alike
            return
        self.scores.update(preds, batch[1])

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.scores is None:
            return
        # On every rank: compute() sums the counts of all ranks when torch.distributed runs.
        rows = table(self.scores.compute().cpu(), class_names(trainer, pl_module))
        if not trainer.is_global_zero:
            return
        written = [
            [k, name, support, *(f"{ratio:.6f}" for ratio in ratios)] for k, name, support, *ratios in rows
        ]
        path = folder.write_csv(run_folder(trainer) / FILE_NAME, COLUMNS, written)
        rank_zero_info(describe(rows, path, self.print_rows))
        data = [list(row) for row in rows]
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_table("test/per_class", COLUMNS, data, step=trainer.global_step)


def class_names(trainer: Trainer, pl_module: LightningModule) -> Sequence[str]:
    """The checkpoint's class names (those the network learnt), else the DataModule's, else none."""
    names = (getattr(pl_module, "data_card", None) or {}).get("class_names")
    return names or provided(trainer.datamodule, "class_names") or []


def table(stats: Tensor, names: Sequence[str]) -> list[tuple[int, str, int, float, float, float]]:
    """One row per class (index, name, support, precision, recall, F1) from per-class stat scores."""
    found = per_class(stats)
    columns = [found[key].tolist() for key in ("support", "precision", "recall", "f1")]
    return [
        (k, str(names[k]) if k < len(names) else str(k), *values)
        for k, values in enumerate(zip(*columns, strict=True))
    ]


def describe(rows: list[tuple], path: Path, print_rows: int) -> str:
    """The table as console lines: every class, or the ``print_rows`` of lowest F1."""
    shown = rows if len(rows) <= print_rows else sorted(rows, key=lambda row: row[5])[:print_rows]
    which = "" if shown is rows else f", the {print_rows} of lowest F1"
    width = max(len("class"), *(len(row[1]) for row in shown))
    lines = [f"test per class ({sum(row[2] for row in rows)} samples{which}; all in {path}):"]
    lines.append(f"  {'class':<{width}}  {'support':>7}  {'precision':>9}  {'recall':>6}  {'F1':>6}")
    for _, name, support, precision, recall, f1 in shown:
        lines.append(f"  {name:<{width}}  {support:>7}  {precision:>9.4f}  {recall:>6.4f}  {f1:>6.4f}")
    return "\n".join(lines)


def per_class(stats: Tensor) -> dict[str, Tensor]:
    """Support, precision, recall and F1 of each class from ``MulticlassStatScores(average=None)``'s
    ``(classes, 5)`` result (tp, fp, tn, fn, support); 0 where a ratio is 0/0, as torchmetrics has it."""
    tp, fp, _, fn, support = stats.double().unbind(dim=1)
    return {
        "support": support.long(),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
    }


def _ratio(counts: Tensor, totals: Tensor) -> Tensor:
    return counts / totals.clamp(min=1)  # a total of 0 has counts of 0: the ratio is 0
