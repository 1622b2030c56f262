"""A callback that writes down what the Trainer runs: its callbacks, checkpoint plugin and profiler."""

import json
from pathlib import Path

from lightning import Callback, LightningModule, Trainer

from app.runs.folder import run_folder


class TrainerProbe(Callback):
    """Writes ``FILE``: the class paths of the Trainer's callbacks, of its checkpoint I/O plugin and of
    its profiler, and the files in the run folder when fit starts.

    Args:
        file: the JSON file written when fit starts.
    """

    def __init__(self, file: str) -> None:
        self.file = Path(file)

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        def path(obj: object) -> str:
            return f"{type(obj).__module__}.{type(obj).__qualname__}"

        ran = {
            "callbacks": [path(c) for c in trainer.callbacks],
            "checkpoint_io": path(trainer.strategy.checkpoint_io),
            "profiler": path(trainer.profiler),
            "files": sorted(p.name for p in run_folder(trainer).iterdir()),
        }
        self.file.write_text(json.dumps(ran))
