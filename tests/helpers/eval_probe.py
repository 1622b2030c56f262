"""A callback the image-folder split tests add from the command line: which samples each rank evaluates."""

import json
from pathlib import Path

from lightning import Callback, LightningModule, Trainer


class EvalProbe(Callback):
    """Writes ``{val,test}-rank{R}.json``: per validation or test run (the sanity check left out), the
    label and a fingerprint (the sum of its pixels) of every image the rank evaluated.

    Args:
        folder: where the files go.
    """

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self.runs: dict[str, list[dict[str, list]]] = {"val": [], "test": []}

    def _start(self, stage: str, trainer: Trainer) -> None:
        if not trainer.sanity_checking:
            self.runs[stage].append({"labels": [], "prints": []})

    def _batch(self, stage: str, trainer: Trainer, batch) -> None:
        if trainer.sanity_checking:
            return
        images, labels = batch
        self.runs[stage][-1]["labels"] += labels.tolist()
        self.runs[stage][-1]["prints"] += images.double().flatten(1).sum(1).tolist()

    def _end(self, stage: str, trainer: Trainer) -> None:
        if not trainer.sanity_checking:
            self.folder.mkdir(parents=True, exist_ok=True)
            file = self.folder / f"{stage}-rank{trainer.global_rank}.json"
            file.write_text(json.dumps(self.runs[stage]))

    def on_validation_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._start("val", trainer)

    def on_validation_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs, batch, *_
    ) -> None:
        self._batch("val", trainer, batch)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._end("val", trainer)

    def on_test_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._start("test", trainer)

    def on_test_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, *_) -> None:
        self._batch("test", trainer, batch)

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._end("test", trainer)
