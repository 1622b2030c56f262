"""Checkpoint files that are either the old one or the new one, never a torn one."""

import errno
import io
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from app.run_folder import TEMP_MARK


class CheckpointWriteError(Exception):
    """A checkpoint could not be written; the previous file at that path is untouched."""


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes to a temporary file in the target folder, fsyncs it, then renames it over the target.

    Lightning's own save goes through an fsspec transaction whose temporary file lives in the
    system temp folder: the final move is a copy (not atomic) when that is another file system,
    and nothing is fsynced, so a power cut can leave a torn file. A rename within one folder is atomic.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        target = Path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f"{target.name}{TEMP_MARK}", dir=target.parent)
        except OSError as err:
            raise CheckpointWriteError(_why(err, target)) from err
        try:
            # Serialized in memory first, so a failed write surfaces as the OSError it is.
            buffer = io.BytesIO()
            torch.save(checkpoint, buffer)
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp's 0600 would hide it from the group
                f.write(buffer.getbuffer())
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, target)
        except BaseException as err:
            Path(temp).unlink(missing_ok=True)
            if isinstance(err, OSError):
                raise CheckpointWriteError(_why(err, target)) from err
            raise
        _fsync_folder(target.parent)


def _why(err: OSError, target: Path) -> str:
    kept = "the previous one is kept" if target.exists() else "no earlier one exists"
    hint = " (disk full? free space or pass another --trainer.default_root_dir)"
    full = err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    return f"could not write checkpoint {target}: {err.strerror or err}{hint if full else ''}; {kept}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_folder(folder: Path) -> None:
    # The rename is durable only once the folder's entry is on disk.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
