"""Running ``python -m app`` from a test: in this process, or as a real subprocess where the process
boundary is what is tested (launchers, signals, kills). Both shrink the run the same way."""

import csv
import importlib.util
import io
import json
import logging
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SHRINK = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=4",
    "--trainer.log_every_n_steps=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
    "--data.num_workers=0",
    "--data.val_size=0.2",
    "--trainer.logger=AppendingCSVLogger",
]
# On a test that runs `python -m app export`: skipped where that optional part (app/export/) was dropped.
needs_export = pytest.mark.skipif(
    importlib.util.find_spec("app.export") is None, reason="the export part (app/export/) was dropped"
)
SHRINK_WANDB = [arg for arg in SHRINK if not arg.startswith("--trainer.logger")]  # the default logger


@dataclass
class Result:
    """What a run of the CLI left: its exit status and its output, as a subprocess would report them."""

    returncode: int
    stdout: str
    stderr: str


def app_args(subcommand: str, *args: str, configs: tuple[str, ...] = (), shrink: bool = True) -> list[str]:
    """``SUBCOMMAND --config C.. [SHRINK] ARGS``."""
    return [subcommand, *(f"--config={ROOT / c}" for c in configs), *(SHRINK if shrink else []), *args]


def app_command(subcommand: str, *args: str, launcher: tuple[str, ...] = (), **options) -> list[str]:
    """``[LAUNCHER] python -m app ...``; LAUNCHER e.g. torchrun's module and flags."""
    return [sys.executable, *launcher, "-m", "app", *app_args(subcommand, *args, **options)]


def app_env() -> dict[str, str]:
    """The environment of a CLI subprocess: the project and ``tests/`` (for test callbacks) importable."""
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}", "PYTHONWARNINGS": "ignore"}


def wandb_offline_env(home: Path) -> dict[str, str]:
    """:func:`app_env` as on a machine not logged in to W&B: no ``WANDB_*`` settings, a ``HOME`` without
    ``.netrc``. The default logger then keeps its run offline."""
    return {**{k: v for k, v in app_env().items() if not k.startswith("WANDB_")}, "HOME": str(home)}


def run_process(
    subcommand: str, *args: str, cwd: Path, timeout: int = 300, env: dict[str, str] | None = None, **options
) -> Result:
    """Run :func:`app_command` as a subprocess in ``cwd``, where its ``runs/`` land (environment
    ``env``, by default :func:`app_env`)."""
    command = app_command(subcommand, *args, **options)
    cwd.mkdir(parents=True, exist_ok=True)
    return run_command(command, cwd=cwd, env=app_env() if env is None else env, timeout=timeout)


def run_command(command: list[str], *, cwd: Path, env: dict[str, str], timeout: int = 300) -> Result:
    """Run ``command`` to its end; one still running after ``timeout`` seconds fails the test with the
    Python stacks of all its processes (every rank a launcher started), where each one waits."""
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "start_new_session": True}
    # faulthandler writes every thread's stack to stderr when the process gets SIGABRT.
    env = {**env, "PYTHONFAULTHANDLER": "1"}
    with subprocess.Popen(command, cwd=cwd, env=env, **options) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGABRT)
            try:
                out, err = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:  # a process that outlives SIGABRT
                os.killpg(process.pid, signal.SIGKILL)
                out, err = process.communicate()
            # Every process's stacks, whole: a rank's and each of its loader workers' (some 10 kB each).
            pytest.fail(f"still running after {timeout} s: {command[1:5]}...; its stacks:\n{err[-60000:]}")
    return Result(process.returncode, out, err)


def run_app(
    subcommand: str, *args: str, cwd: Path, configs: tuple[str, ...] = (), shrink: bool = True
) -> Result:
    """Run the CLI's ``main`` in this process, in ``cwd``, as a subprocess would run it.

    The output is caught at the file descriptors (Lightning's and wandb's handlers hold their own
    streams), and the working folder, environment and SIGCHLD handler are put back afterwards. An
    exception that escapes ``main`` becomes exit status 1 with its traceback on stderr, as in a real
    process.
    """
    from app.cli import main

    cwd.mkdir(parents=True, exist_ok=True)
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_sigchld = signal.getsignal(signal.SIGCHLD)
    handlers = [
        h for name in ("lightning.pytorch", "lightning.fabric") for h in logging.getLogger(name).handlers
    ]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        streams = sys.stdout, sys.stderr, [h.stream for h in handlers]
        sys.stdout.flush()
        sys.stderr.flush()
        fds = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(1), "wb"), line_buffering=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(os.dup(2), "wb"), line_buffering=True)
        for handler in handlers:
            handler.stream = sys.stderr
        # Where no handler of Lightning's or ours takes a record, a process prints it on stderr.
        fallback = logging.StreamHandler(sys.stderr)
        logging.root.addHandler(fallback)
        code = 0
        try:
            os.chdir(cwd)
            sys.argv = ["app"]  # as `python -m app` has it; the arguments go to main
            main(app_args(subcommand, *args, configs=configs, shrink=shrink))
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
            if isinstance(exit.code, str):
                sys.stderr.write(exit.code + "\n")
        except Exception:
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            os.chdir(saved_cwd)
            sys.argv = saved_argv
            signal.signal(signal.SIGCHLD, saved_sigchld)
            os.environ.clear()
            os.environ.update(saved_env)
            sys.stdout.close()
            sys.stderr.close()
            sys.stdout, sys.stderr, old = streams
            logging.root.removeHandler(fallback)
            for handler, stream in zip(handlers, old, strict=True):
                handler.stream = stream
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            os.close(fds[0])
            os.close(fds[1])
        out.seek(0)
        err.seek(0)
        return Result(code, out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def run_folder(cwd: Path, version: int = 0) -> Path:
    """The folder ``runs/NAME/version_N`` of the one run name used under ``cwd``."""
    (found,) = (cwd / "runs").glob(f"*/version_{version}")
    return found


def logged(run: Path) -> dict[str, list[float]]:
    """Every metric a run's CSVLogger wrote, in order."""
    values: dict[str, list[float]] = {}
    with open(run / "metrics.csv") as f:
        for row in csv.DictReader(f):
            for key, value in row.items():
                if value and key not in ("epoch", "step"):
                    values.setdefault(key, []).append(float(value))
    return values


def check(result: Result) -> None:
    assert result.returncode == 0, result.stderr[-3000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def max_difference(a: dict, b: dict) -> float:
    """Largest absolute difference between two state dicts with the same keys."""
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


def callback(class_path: str, **init_args) -> str:
    """The flag that adds the callback ``class_path`` (e.g. ``helpers.stops.NanAt``) to a run."""
    return f"--trainer.callbacks+={json.dumps({'class_path': class_path, 'init_args': init_args})}"


def probe(folder: Path) -> str:
    """The flag that adds a :class:`helpers.weights_probe.WeightsProbe` writing to ``folder``."""
    return callback("helpers.weights_probe.WeightsProbe", folder=str(folder))


def load_probe(folder: Path, moment: str, rank: int) -> dict:
    """What the probe saved for ``rank`` at ``moment`` (start or end)."""
    return torch.load(folder / f"{moment}-rank{rank}.pt", weights_only=True)


def one_error_line(stderr: str) -> str:
    """The last line of ``stderr``, checked to be an ``error:`` line after no traceback."""
    assert "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), stderr[-3000:]
    return last


def small_disk(limit: int):
    """A ``preexec_fn``: files of the process may not grow past ``limit`` bytes, so writes fail as on a full
    disk (EFBIG rather than a SIGXFSZ that would kill it)."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply
