"""One fit of a trial: a ``python -m app fit`` process (a whole DDP job where the flags say so), its
validations relayed to the study, pruned as a whole."""

import fcntl
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import optuna

from app.tune.report import lines

POLL = 0.1  # seconds between looks at the trial's reports


@dataclass
class Fit:
    """How one fit of a trial ended.

    Attributes:
        values: the monitored value at each validation, in order (a resume's repeats left out).
        pruned: stopped by the pruner.
        error: the trial's last ``error:`` line (or its exit status) where it failed; None otherwise.
    """

    values: list[float]
    pruned: bool = False
    error: str | None = None

    def best(self, direction: str) -> float | None:
        """The best value of the fit (the one its best checkpoint holds)."""
        finite = [v for v in self.values if not math.isnan(v)]
        if not finite:
            return None
        return max(finite) if direction == "maximize" else min(finite)


def flag(key: str, value: object) -> str:
    """``--key=value`` as the CLI parses it (JSON for what is not a string)."""
    return f"--{key}={value if isinstance(value, str) else json.dumps(value)}"


def wait_for_lock(channel: Path, timeout: float = 300) -> None:
    """Wait until no process holds a run folder under ``channel`` (a trial outliving its killed tune
    process stops within seconds of noticing, and saves ``last.ckpt`` first)."""
    deadline = time.monotonic() + timeout
    for lock in channel.glob("version_*/.lock"):
        with open(lock, "a") as handle:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(handle, fcntl.LOCK_UN)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        return  # the fit itself then says who holds it
                    time.sleep(0.5)


def run_fit(
    command: list[str],
    channel: Path,
    trial: optuna.Trial | None,
    env: dict[str, str],
) -> Fit:
    """Run ``command`` (a fit that reports into ``channel``), relaying its values to ``trial`` (None: no
    pruning, a later fold)."""
    channel.mkdir(parents=True, exist_ok=True)
    wait_for_lock(channel)
    reports, verdicts = channel / "reports.jsonl", channel / "verdicts"
    answered = len(lines(verdicts))
    seen: dict[int, float] = {}  # global step -> value: a resumed fit may validate a step again
    fit = Fit([])
    read = 0

    def relay() -> None:
        nonlocal read
        found = lines(reports)
        for number in range(read, len(found)):
            report = json.loads(found[number])
            value = math.nan if report["value"] is None else report["value"]
            verdict = "go"
            if report["step"] not in seen:
                seen[report["step"]] = value
                if trial is not None:
                    trial.report(value, len(seen) - 1)
                    verdict = "prune" if trial.should_prune() else "go"
            if number >= answered:  # a report answered before this process (a resume's) stands
                fit.pruned = fit.pruned or verdict == "prune"
                with open(verdicts, "a") as f:
                    f.write(verdict + "\n")
        read = len(found)

    with open(channel / "output.log", "a") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            while process.poll() is None:
                relay()
                time.sleep(POLL)
        except BaseException:
            process.terminate()  # Ctrl-C or SIGTERM to this process: the fit saves last.ckpt and ends
            process.wait()
            raise
    relay()
    fit.values = list(seen.values())
    if process.returncode != 0 and not fit.pruned:
        errors = [
            line for line in (channel / "output.log").read_text().splitlines() if line.startswith("error:")
        ]
        fit.error = (
            errors[-1].removeprefix("error:").strip() if errors else f"exit status {process.returncode}"
        )
    return fit


def fit_command(
    base: list[str],
    values: dict[str, object],
    name: str,
    root: Path,
    channel: Path,
    monitor: str,
    resume: bool,
) -> list[str]:
    """The ``python -m app fit`` command of one fit of a trial."""
    report = {
        "class_path": "app.tune.report.TrialReport",
        "init_args": {"channel": str(channel), "monitor": monitor, "driver": os.getpid()},
    }
    return [
        sys.executable,
        "-m",
        "app",
        "fit",
        *base,
        *(flag(key, value) for key, value in values.items()),
        f"--trainer.default_root_dir={root}",
        f"--name={name}",
        "--test_after_fit=false",
        f"--trainer.callbacks+={json.dumps(report)}",
        *(["--ckpt_path=last"] if resume else []),
    ]
