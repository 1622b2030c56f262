"""Where a run lives: ``runs/<name>/<version>/``, and which checkpoint ``--ckpt_path last`` means.

It holds ``config.yaml``, ``checkpoints/``, ``metrics.csv``, ``wandb/``, ``plots/``, ``predictions.csv``.
Rank 0 claims ``version_N`` with an atomic ``mkdir``: two jobs started together never share one.
"""

import copy
import csv
import fcntl
import io
import itertools
import logging
import os
import pkgutil
import re
import shutil
import socket
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, NamedTuple

import yaml
from jsonargparse import Namespace
from lightning import Trainer
from lightning.fabric.loggers import Logger
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from app.errors import UsageError
from app.parser import class_defaults
from app.runs.checkpoints import checkpoints, folder_of, intact, remove_stale_temps
from data.files import write_whole

log = logging.getLogger(__name__)

# Set by the process that picked the folder for the ranks Lightning's ddp launcher starts, which run the
# command again in processes of their own (inherited()).
RUN_DIR_ENV = "APP_RUN_DIR"
LOCK_FILE = ".lock"
BASE_ROOT_DIR = Logger.root_dir  # what a logger has that does not nest its files


def _versions(parent: Path) -> list[Path]:
    found = [p for p in parent.glob("version_*") if re.fullmatch(r"version_\d+", p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.split("_")[1]))


def claim_new(parent: Path, create: bool) -> Path:
    """The next ``version_N`` under ``parent``; made (atomically) only when ``create``."""
    versions = _versions(parent)
    number = int(versions[-1].name.split("_")[1]) + 1 if versions else 0
    if not create:
        return parent / f"version_{number}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        while True:
            run = parent / f"version_{number}"
            try:
                run.mkdir()
                return run
            except FileExistsError:
                number += 1
    except OSError as err:
        raise UsageError(
            f"cannot create a run folder in {parent} ({err.strerror}); "
            "pass a writable --trainer.default_root_dir"
        ) from err


def newest_intact(parent: Path) -> Path | None:
    """The newest readable checkpoint of the newest run under ``parent`` that has one."""
    for run in reversed(_versions(parent)):
        for path in checkpoints(run):
            if intact(path):
                return path
            log.warning(f"skipping {path}: not a complete checkpoint (a save was cut short?)")
    return None


def unsaved(parent: Path) -> Path | None:
    """The newest run under ``parent`` if it holds no checkpoint yet (killed before its first save)."""
    versions = _versions(parent)
    return versions[-1] if versions and not checkpoints(versions[-1]) else None


def run_of(checkpoint: Path) -> Path | None:
    """The run folder ``checkpoint`` belongs to, if it sits in our layout."""
    for folder in (checkpoint.parent.parent, checkpoint.parent):
        if (folder / "config.yaml").is_file() or folder_of(folder).is_dir():
            return folder
    return None


def run_folder(trainer: Trainer) -> Path:
    """The run folder ``trainer`` writes (``Trainer.run_folder``); a plain Lightning Trainer's own root."""
    return Path(getattr(trainer, "run_folder", None) or trainer.default_root_dir)


def current() -> Path | None:
    """The run folder this process works in, once it picked one (or inherited it)."""
    return next(iter(_held), None) or inherited()


def inherited() -> Path | None:
    """The folder picked by the launching process, in a rank that Lightning's launcher started."""
    value = os.environ.get(RUN_DIR_ENV)
    return Path(value) if value and os.environ.get("LOCAL_RANK") else None


def _short(class_path: str, suffix: str = "") -> str:
    name = class_path.rsplit(".", 1)[-1]
    return name.removesuffix(suffix) or name


class Run(NamedTuple):
    """The run a command works in: its ``folder`` (``ROOT/NAME/version_N``), whether this command
    ``created`` it (removed again if it fails before training), and the config values :func:`resolve`
    filled in, as the user ``given`` them (for ``config.yaml``)."""

    folder: Path
    created: bool
    given: dict[str, Any]


def resolve(config) -> Run:
    """Pick the run folder (``fit``: a new one; else the checkpoint's) and ``--ckpt_path last``, lock it,
    point the checkpoints and loggers at it (``--trainer.default_root_dir`` stays the root of all runs)."""
    rank_zero = job_rank_zero()
    name = config.get("name") or "-".join(
        (_short(config.data.class_path, "DataModule"), _short(config.model.net.class_path))
    )
    parent = Path(config.trainer.default_root_dir or "runs") / name
    ckpt, run = config.get("ckpt_path"), inherited()
    if ckpt == "last":
        found = newest_intact(parent)
        if found is None:
            # A run killed before its first checkpoint starts again in its own folder.
            run = run or unsaved(parent)
            rank_zero_info(f"--ckpt_path last: no checkpoint under {parent} yet; starting from scratch")
        else:
            rank_zero_info(f"--ckpt_path last: resuming from {found}")
        ckpt = config.ckpt_path = str(found) if found else None
    run = run or (run_of(Path(ckpt)) if ckpt else None)
    created = run is None
    if run is None:
        run = claim_new(parent, create=rank_zero)
    elif rank_zero and not os.access(run, os.W_OK):
        raise UsageError(f"the run folder {run} is not writable; fix its permissions")
    if rank_zero and not inherited():
        lock(run)
        if not created:
            remove_stale_temps(run)
    given = {"trainer.logger": copy.deepcopy(config.trainer.get("logger"))}
    os.environ[RUN_DIR_ENV] = str(run)
    if "checkpoint" in config:
        given["checkpoint.dirpath"] = config.checkpoint.dirpath
        config.checkpoint.dirpath = str(folder_of(run))
    configure_loggers(config.trainer.get("logger"), run)
    return Run(run, created and rank_zero, given)


def configure_loggers(logger_config: object, run: Path) -> None:
    """Make every logger of ``logger_config`` (the parsed ``trainer.logger``) write into ``run``, in place;
    one that nests ``save_dir/name/version`` (Lightning's CSV, TensorBoard) writes into ``run`` itself."""
    for logger in logger_config if isinstance(logger_config, list) else [logger_config]:
        if not (isinstance(logger, Namespace) and logger.get("class_path")):
            continue  # True, False or None: Lightning's default logger, or none
        args = logger.init_args = logger.get("init_args") or Namespace()
        if "save_dir" in class_defaults(logger.class_path):
            args.save_dir = str(run)
        if getattr(pkgutil.resolve_name(logger.class_path), "root_dir", BASE_ROOT_DIR) is not BASE_ROOT_DIR:
            args.name, args.version = "", ""


_held: dict[Path, IO[str]] = {}  # the run folders this process writes, and their open lock files


def lock(run: Path) -> None:
    """Hold ``RUN/.lock`` until :func:`unlock` or the process ends; one line naming the holder if taken."""
    if run in _held:
        return
    handle = open(run / LOCK_FILE, "a+")  # noqa: SIM115 (held open while the run is written)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise UsageError(
            f"the run folder {run} is in use by {holder}; wait for it to end, or start a new run "
            "(without --ckpt_path)"
        ) from err
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()}: {' '.join(sys.argv[1:])[:200]}\n")
    handle.flush()
    _held[run] = handle


def unlock() -> None:
    """Let go of every run folder this process holds."""
    for handle in _held.values():
        # Released explicitly: forked DataLoader workers share the open file, and would hold it on.
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
    _held.clear()


def unused(path: Path) -> Path:
    """``path``, or the first of ``NAME-2.EXT``, ``NAME-3.EXT``, ... not there yet: nothing is replaced."""
    candidates = (path.with_name(f"{path.stem}-{k}{path.suffix}") for k in itertools.count(2))
    return next(p for p in itertools.chain([path], candidates) if not p.exists())


def write_csv(path: Path, header: list[str], rows: Iterable[list]) -> Path:
    """Write ``rows`` under ``header`` to :func:`unused` ``(path)``, whole or not at all; the path written."""
    path = unused(path)
    text = io.StringIO(newline="")
    csv.writer(text).writerows([header, *rows])
    write_whole(path, text.getvalue().encode(), "and run the command again")
    return path


def job_rank_zero() -> bool:
    """Whether this process is the job's first: global rank 0 on node 0 (before Lightning sets ranks too)."""
    return rank_zero_only.rank == 0 and int(os.environ.get("NODE_RANK", 0)) == 0


def discard(run: Run) -> None:
    """Remove ``run``'s folder if this command made it and nothing was saved in it."""
    if run.created and not checkpoints(run.folder):
        shutil.rmtree(run.folder, ignore_errors=True)


def run_config(args: list[str]) -> Path | None:
    """The ``RUN/config.yaml`` that ``validate|test|predict|export --ckpt_path RUN/checkpoints/X.ckpt``
    reads before the flags (the network and data of the checkpoint); None otherwise or with ``--config``."""
    if not args or args[0] not in ("validate", "test", "predict", "export"):
        return None
    if any(arg in ("-c", "--config") or arg.startswith("--config=") for arg in args):
        return None
    paths = [b for a, b in itertools.pairwise(args) if a == "--ckpt_path"]
    paths += [arg.split("=", 1)[1] for arg in args if arg.startswith("--ckpt_path=")]
    run = run_of(Path(paths[-1])) if paths and paths[-1] != "last" else None
    config = run / "config.yaml" if run else None
    if not (config and config.is_file()):
        return None
    try:
        yaml.safe_load(config.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        where = getattr(err, "problem_mark", None)
        line = f" at line {where.line + 1}" if where else ""
        raise UsageError(
            f"{config}, the run config of --ckpt_path {paths[-1]}, is not readable YAML{line}: fix it, or "
            "pass the network and data flags yourself with --config FILE"
        ) from None
    return config
