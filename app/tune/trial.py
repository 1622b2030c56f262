"""One fit of a trial: a ``python -m app fit`` process (a whole DDP job where the flags say so), its
validations relayed to the study, pruned as a whole."""

import fcntl
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import optuna

from app.tune.report import append, lines

POLL = 0.1  # seconds between looks at the trial's reports
STOP = "stop"  # the verdict that frees a fit being ended before the pruner answered


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


def wait_for_lock(run: Path, timeout: float = 300) -> None:
    """Wait until no process holds a run folder under ``run`` (a trial outliving its killed tune process
    stops within seconds of noticing, and saves ``last.ckpt`` first)."""
    deadline = time.monotonic() + timeout
    for lock in run.glob("version_*/.lock"):
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


class Relay:
    """The fit's reports passed to ``trial`` (None: a later fold, never pruned), each answered in
    ``verdicts``; an answer written before (by a tune process since gone) stands."""

    def __init__(self, channel: Path, trial: optuna.Trial | None) -> None:
        self.reports, self.verdicts, self.trial = channel / "reports.jsonl", channel / "verdicts", trial
        self.answered = lines(self.verdicts)
        self.seen: dict[int, float] = {}  # global step -> value: a resumed fit may validate a step again
        self.read, self.pruned = 0, False

    def __call__(self) -> None:
        found = lines(self.reports)
        for number in range(self.read, len(found)):
            report = json.loads(found[number])
            value = math.nan if report["value"] is None else report["value"]
            verdict = "go"
            if report["step"] not in self.seen:
                self.seen[report["step"]] = value
                if self.trial is not None:
                    self.trial.report(value, len(self.seen) - 1)
                    verdict = "prune" if self.trial.should_prune() else "go"
            if number < len(self.answered):
                # An answer stands; "stop" (the fit was ended before the pruner answered) is judged now.
                verdict = verdict if self.answered[number] == STOP else self.answered[number]
            else:
                self.answered.append(verdict)
                append(self.verdicts, verdict)
            self.pruned = self.pruned or verdict == "prune"
        self.read = len(found)

    def release(self) -> None:
        """Answer each report still waiting with ``stop``: the fit goes on to its SIGTERM (last.ckpt)."""
        for _ in range(len(self.answered), len(lines(self.reports))):
            self.answered.append(STOP)
            append(self.verdicts, STOP)


def run_fit(
    command: list[str],
    run: Path,
    channel: Path,
    trial: optuna.Trial | None,
    env: dict[str, str],
    stop: Callable[[], bool] = lambda: False,
) -> Fit:
    """Run ``command`` (a fit in the run folder ``run`` that reports into ``channel``), relaying its values
    to ``trial`` (None: no pruning, a later fold). A fit pruned before (its tune process killed after the
    verdict) is not run again; ``stop()`` true ends the fit as a SIGTERM does."""
    channel.mkdir(parents=True, exist_ok=True)
    run.mkdir(parents=True, exist_ok=True)
    wait_for_lock(run)
    relay = Relay(channel, trial)
    relay()
    if relay.pruned:
        return Fit(list(relay.seen.values()), pruned=True)
    with open(run / "output.log", "a") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            while process.poll() is None:
                relay()
                if stop():
                    raise Stopped()
                time.sleep(POLL)
        except BaseException:
            # Ctrl-C or SIGTERM to this process, the storage gone, the trial taken over: the fit, freed
            # from any report it waits on, saves last.ckpt and ends.
            relay.release()
            process.terminate()
            process.wait()
            raise
    relay()
    fit = Fit(list(relay.seen.values()), pruned=relay.pruned)
    if process.returncode != 0 and not fit.pruned:
        errors = [line for line in (run / "output.log").read_text().splitlines() if line.startswith("error:")]
        fit.error = (
            errors[-1].removeprefix("error:").strip() if errors else f"exit status {process.returncode}"
        )
    return fit


def repeats(seeds: list[int] | None, folds: int) -> list[tuple[str, dict[str, object]]]:
    """The fits of a trial, in order: each one's folder under the trial's (empty for a trial of one fit)
    and its own flags; every fold of ``seeds[0]`` (None: the config's seed), then of the next seed."""
    found: list[tuple[str, dict[str, object]]] = []
    for seed in seeds or [None]:
        for fold in range(folds):
            parts, flags = [], {}
            if seed is not None:
                parts.append(f"seed-{seed}")
                flags["seed_everything"] = seed
            if folds > 1:
                parts.append(f"fold-{fold}")
                flags.update({"data.folds": folds, "data.fold": fold})
            found.append(("/".join(parts), flags))
    return found


class Stopped(Exception):
    """The tune process stopped a running fit (its trial taken over, or its storage gone)."""


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
