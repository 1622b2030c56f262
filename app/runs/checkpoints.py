"""Checkpoint files: written whole or not at all, checked before use, and found for ``--ckpt_path last``."""

import contextlib
import errno
import io
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from app.errors import UsageError

TEMP_MARK = ".tmp-"  # in the names of files being written


def folder_of(run: Path | str) -> Path:
    """A run's checkpoint folder."""
    return Path(run) / "checkpoints"


def last_of(run: Path | str) -> Path:
    """A run's ``last.ckpt``: where resumes start from."""
    return folder_of(run) / "last.ckpt"


# workaround: Lightning's TorchCheckpointIO fsyncs nothing (2.6); gone when it writes atomically
class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes to a temporary file in the target folder, fsyncs it, then renames it over the target.

    Lightning's own moves it from the system temp folder (a copy across file systems) and fsyncs
    nothing: a power cut can leave a torn file. A rename within one folder is atomic.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        target = Path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f"{target.name}{TEMP_MARK}", dir=target.parent)
        except OSError as err:
            raise UsageError(_why(err, target)) from err
        buffer = io.BytesIO()
        try:
            # Serialized in memory first, so a failed write surfaces as the OSError it is.
            torch.save(checkpoint, buffer)
            umask = os.umask(0)  # read by setting it: put back at once
            os.umask(umask)
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o666 & ~umask)  # mkstemp's 0600 would hide it from the group
                f.write(buffer.getbuffer())
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, target)
        except BaseException as err:
            Path(temp).unlink(missing_ok=True)
            if isinstance(err, OSError):
                raise UsageError(_why(err, target, buffer.tell())) from err
            raise
        _fsync_folder(target.parent)


def _why(err: OSError, target: Path, size: int = 0) -> str:
    kept = "the previous one is kept" if target.exists() else "no earlier one exists"
    full = err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # disk, quota or file-size limit
    if full and size:
        return (
            f"no room for checkpoint {target.name} in {target.parent} ({err.strerror}): it needs {size:,} "
            f"bytes; free that much there or pass another --trainer.default_root_dir; {kept}"
        )
    hint = " (disk full? free space or pass another --trainer.default_root_dir)"
    return f"could not write checkpoint {target}: {err.strerror or err}{hint if full else ''}; {kept}"


def _fsync_folder(folder: Path) -> None:
    # The rename is durable only once the folder's entry is on disk.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def intact(path: Path) -> bool:
    """Whether ``path`` is a whole checkpoint: torch's zip format, every member's CRC correct."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


def checkpoints(run: Path) -> list[Path]:
    """Checkpoints of one run, newest first (temporary files of an interrupted save left out)."""
    found = [*folder_of(run).glob("*.ckpt"), *run.glob("*.ckpt")]
    found = [p for p in found if TEMP_MARK not in p.name]
    return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)


def remove_stale_temps(run: Path) -> None:
    """Delete half-written checkpoints left by a process killed while saving."""
    for path in [*folder_of(run).glob(f"*{TEMP_MARK}*"), *run.glob(f"*{TEMP_MARK}*")]:
        path.unlink(missing_ok=True)


def check_checkpoint(path: str) -> None:
    """Raise a one-line :class:`UsageError` unless ``path`` is a whole checkpoint file."""
    if not Path(path).is_file():
        raise UsageError(f"--ckpt_path {path}: no such file")
    if not intact(Path(path)):
        raise UsageError(
            f"--ckpt_path {path} is not a complete checkpoint (cut short or corrupt); "
            "--ckpt_path last picks the newest intact one"
        )


def check_fits(path: str, model: torch.nn.Module, resume: bool = False) -> None:
    """Raise a one-line :class:`UsageError` unless the checkpoint's weights fit ``model`` tensor for tensor
    and, to ``resume`` its training, the model's recipe can go on from it (``why_not_resume``).
    Run before anything is written, rather than a size-mismatch traceback halfway through."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    saved = checkpoint["state_dict"]
    mine = model.state_dict()
    problems = [
        f"{key} is {'x'.join(map(str, value.shape))} there, {'x'.join(map(str, mine[key].shape))} here"
        for key, value in saved.items()
        if key in mine and value.shape != mine[key].shape
    ]
    problems += [f"{key} only there" for key in sorted(saved.keys() - mine.keys())]
    problems += [f"{key} only here" for key in sorted(mine.keys() - saved.keys())]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(
            f"--ckpt_path {path} does not fit this network: {problems[0]}{more}; drop the --model/--data "
            "flags that differ from its run's config.yaml, or start a new run without --ckpt_path"
        )
    why = model.why_not_resume(checkpoint, path) if resume else None
    if why:
        raise UsageError(why)


def data_card(path: str) -> dict[str, Any]:
    """The data a checkpoint was trained on (class names, input shape, normalization; see
    ``data.contract.card``), or an empty dict for a checkpoint written without it."""
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("data") or {}
