"""A logger of the user's own, as Lightning's ``Logger`` API lets anyone write one: one JSON line per log."""

import json
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger


class JsonLinesLogger(Logger):
    """Appends each logged metrics dict to ``SAVE_DIR/metrics.jsonl``.

    Args:
        save_dir: the folder of the file.
    """

    def __init__(self, save_dir: str = ".") -> None:
        super().__init__()
        self._save_dir = save_dir

    @property
    def name(self) -> str:
        return "jsonl"

    @property
    def version(self) -> str:
        return "0"

    @property
    def save_dir(self) -> str:
        return self._save_dir

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        with open(Path(self._save_dir) / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"step": step, **metrics}) + "\n")
