"""Where a run lives: ``runs/<name>/<version>/``, and which checkpoint ``--ckpt_path last`` means.

A run folder holds ``config.yaml``, ``checkpoints/``, ``metrics.csv``, ``wandb/``, ``plots/`` and
``predictions.csv``. Versions are ``version_0``, ``version_1``, ...; rank 0 claims one with an
atomic ``mkdir``, so two jobs started together never share a folder.
"""

import logging
import os
import re
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

# Set by the process that picked the folder; Lightning's ddp launcher passes it to the ranks it starts.
RUN_DIR_ENV = "APP_RUN_DIR"
TEMP_MARK = ".tmp-"


class RunFolderError(Exception):
    """The run folder cannot be made or written; the message says which and why."""


def _versions(parent: Path) -> list[Path]:
    found = [p for p in parent.glob("version_*") if re.fullmatch(r"version_\d+", p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.split("_")[1]))


def claim_new(parent: Path, create: bool) -> Path:
    """The next ``version_N`` under ``parent``; made (atomically) only when ``create``."""
    versions = _versions(parent) if parent.is_dir() else []
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
        raise RunFolderError(
            f"cannot create a run folder in {parent} ({err.strerror}); "
            "pass a writable --trainer.default_root_dir"
        ) from err


def intact(path: Path) -> bool:
    """Whether ``path`` is a whole checkpoint: torch's zip format, every member's CRC correct."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


def checkpoints(run: Path) -> list[Path]:
    """Checkpoints of one run, newest first (temporary files of an interrupted save left out)."""
    found = [*run.glob("checkpoints/*.ckpt"), *run.glob("*.ckpt")]
    found = [p for p in found if TEMP_MARK not in p.name]
    return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)


def newest_intact(parent: Path) -> Path | None:
    """The newest readable checkpoint of the newest run under ``parent`` that has one.

    Unreadable ones are skipped with a warning naming them.
    """
    for run in reversed(_versions(parent) if parent.is_dir() else []):
        for path in checkpoints(run):
            if intact(path):
                return path
            log.warning(f"skipping {path}: not a complete checkpoint (a save was cut short?)")
    return None


def remove_stale_temps(run: Path) -> None:
    """Delete half-written checkpoints left by a process killed while saving."""
    for path in [*run.glob(f"checkpoints/*{TEMP_MARK}*"), *run.glob(f"*{TEMP_MARK}*")]:
        path.unlink(missing_ok=True)


def run_of(checkpoint: Path) -> Path | None:
    """The run folder ``checkpoint`` belongs to, if it sits in our layout."""
    for folder in (checkpoint.parent.parent, checkpoint.parent):
        if (folder / "config.yaml").is_file() or (folder / "checkpoints").is_dir():
            return folder
    return None


def inherited() -> Path | None:
    """The folder picked by the launching process, in a rank that Lightning's launcher started."""
    value = os.environ.get(RUN_DIR_ENV)
    return Path(value) if value and os.environ.get("LOCAL_RANK") else None
