"""One training step traced (``sys.settrace``): the project's functions it runs, in order, as the list that
``docs/reading_path.md`` holds (``python scripts/reading_path.py`` writes it)."""

import json
import os
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

from lightning import Callback, LightningModule, Trainer

from helpers.cli import callback, run_app
from helpers.data_files import write_mnist

ROOT = Path(__file__).resolve().parents[2]
OURS = tuple(str(ROOT / folder) + "/" for folder in ("app", "data", "models"))


class StepTrace(Callback):
    """Writes ``FILE``: the functions of ``app/``, ``data/`` and ``models/`` that the training step ``step``
    ran (from the end of the step before to its own end: fetching the batch, the hooks, the optimizer step),
    in the order of their first call, and the lines of each file it ran.

    Args:
        file: the JSON file written: ``[[file, [function, ...], lines], ...]``.
        step: the batch index of the step traced (later than the first, which warms up).
    """

    def __init__(self, file: str, step: int = 2) -> None:
        self.file, self.step = Path(file), step
        self.functions: dict[str, list[str]] = {}
        self.lines: dict[str, set[int]] = {}

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int
    ):
        if batch_idx == self.step - 1:
            sys.settrace(self._call)
        elif batch_idx == self.step:
            sys.settrace(None)
            rows = [[f, names, len(self.lines[f])] for f, names in self.functions.items()]
            self.file.write_text(json.dumps(rows))

    def _call(self, frame: FrameType, event: str, arg: Any):
        path = frame.f_code.co_filename
        if not path.startswith(OURS):
            return None
        file = str(Path(path).relative_to(ROOT))
        names = self.functions.setdefault(file, [])
        if frame.f_code.co_qualname not in names:
            names.append(frame.f_code.co_qualname)
        self.lines.setdefault(file, set())
        return self._line

    def _line(self, frame: FrameType, event: str, arg: Any):
        if event == "line":
            self.lines[str(Path(frame.f_code.co_filename).relative_to(ROOT))].add(frame.f_lineno)
        return self._line


DOC = ROOT / "docs" / "reading_path.md"
HEAD = """# One training step, in reading order

The functions of `app/`, `data/` and `models/` that one training step of `python -m app fit` runs with the
defaults (MNIST, MnistCNN, SGD, the default callbacks and logger), from the end of the step before to its own
end, in the order of their first call: a trace (`python scripts/reading_path.py` writes this file, and
`tests/test_reading_path.py` checks it against a new trace). The rest of the step is Lightning's and torch's.

"""


def trace() -> list[tuple[str, list[str], int]]:
    """``[(file, functions, lines run)]`` of the third step of a default fit on a small MNIST."""
    with tempfile.TemporaryDirectory() as folder:
        work, offline = Path(folder), os.environ.get("WANDB_MODE")
        mnist, out = write_mnist(work / "data"), work / "trace.json"
        args = [
            f"--data.root={mnist}",
            "--data.val_size=0.2",
            "--trainer.max_epochs=1",
            "--test_after_fit=false",
        ]
        args += ["--trainer.limit_train_batches=4", callback("helpers.step_trace.StepTrace", file=str(out))]
        os.environ["WANDB_MODE"] = "offline"
        try:
            result = run_app("fit", *args, shrink=False, cwd=work)
        finally:
            os.environ.pop("WANDB_MODE") if offline is None else os.environ.update(WANDB_MODE=offline)
        assert result.returncode == 0, result.stderr[-3000:]
        return [tuple(row) for row in json.loads(out.read_text())]


def markdown(rows: list[tuple[str, list[str], int]]) -> str:
    """The numbered list, a file a line: its functions, the lines of it that ran."""
    items = [
        f"{i}. `{file}`: {', '.join(f'`{name}`' for name in names)} ({lines} line{'s' * (lines != 1)})"
        for i, (file, names, lines) in enumerate(rows, 1)
    ]
    total = sum(lines for _, _, lines in rows)
    return HEAD + "\n".join(items) + f"\n\nIn all: {len(rows)} files, {total} lines run.\n"
