"""Inside a trial: each validation's value handed to the ``tune`` process, which answers go on or prune.

The trial never opens the study's storage (so any storage serves a DDP trial): rank 0 adds a line to
``CHANNEL/reports.jsonl`` and waits for the line of the same number in ``CHANNEL/verdicts``; every rank
then stops together where the answer is ``prune``. Each file has one writer, which replaces it whole.
"""

import json
import os
import signal
import threading
import time
from pathlib import Path

from lightning import Callback, LightningModule, Trainer

POLL = 0.05  # seconds between looks at the verdicts file: small beside a validation


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lines(path: Path) -> list[str]:
    """The lines of ``path`` (none if it is missing)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return text.split("\n")[:-1]


def replace(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all: a process killed mid-write leaves the file as it was."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    os.replace(temporary, path)


def append(path: Path, line: str) -> None:
    """Add ``line`` to ``path`` (its one writer), whole or not at all."""
    replace(path, "".join(f"{old}\n" for old in lines(path)) + line + "\n")


class TrialReport(Callback):
    """Reports each validation's ``monitor`` to ``python -m app tune`` and stops the job when it prunes.

    Added to a trial's command line by the tune process, so it shows in the trial's ``config.yaml``.
    Should the tune process end (killed, its machine gone), training stops as for a SIGTERM, with
    ``last.ckpt`` saved, so that the trial can be resumed.

    Args:
        channel: the folder the tune process reads reports from and writes verdicts to.
        monitor: the logged value a trial is judged by.
        driver: the tune process's pid.
    """

    def __init__(self, channel: str, monitor: str, driver: int) -> None:
        self.channel, self.monitor, self.driver = Path(channel), monitor, driver
        self.stop_watch = threading.Event()

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        verdict = "go"
        if trainer.is_global_zero:
            value = trainer.callback_metrics.get(self.monitor)
            report = {"step": trainer.global_step, "value": None if value is None else float(value)}
            reports = self.channel / "reports.jsonl"
            number = len(lines(reports))
            append(reports, json.dumps(report))
            verdict = self.wait(number)
        if trainer.strategy.broadcast(verdict, src=0) == "prune":
            trainer.should_stop = True

    def wait(self, number: int) -> str:
        """The tune process's answer to report ``number``; where it is gone, training stops (SIGTERM)."""
        verdicts = self.channel / "verdicts"
        while alive(self.driver):
            found = lines(verdicts)
            if len(found) > number:
                return found[number]
            time.sleep(POLL)
        self.orphaned()
        return "go"

    def orphaned(self) -> None:
        # A trial outliving its tune process would train on unseen: stop it as SIGTERM does (last.ckpt saved
        # on every rank at the same step), so the next `tune` run resumes it.
        self.stop_watch.set()
        os.kill(os.getpid(), signal.SIGTERM)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.is_global_zero:
            self.stop_watch.clear()
            threading.Thread(target=self.watch, daemon=True).start()

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.stop_watch.set()

    def watch(self) -> None:
        while not self.stop_watch.wait(1.0):
            if not alive(self.driver):
                self.orphaned()
                return
