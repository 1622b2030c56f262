"""Files written whole or not at all, and a full disk said in one line."""

import errno
import os
from pathlib import Path

from data.vision import DataError

FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a full disk, a full quota, the file-size limit


def write_whole(path: Path, body: bytes | memoryview, then: str) -> None:
    """Write ``body`` to ``path`` through a temporary file renamed over it: a reader, or the file as it
    was, never meets half of it.

    Raises:
        DataError: the disk is full (or the quota, or the file-size limit): the line names the folder and
            the bytes needed, then says ``then``; the temporary file is gone, ``path`` as it was.
    """
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as f:
            f.write(body)
        os.replace(partial, path)
    except OSError as err:
        partial.unlink(missing_ok=True)
        if err.errno not in FULL:
            raise
        raise DataError(
            f"no room for {path.name} in {path.parent} ({err.strerror}): it needs {len(body):,} bytes; "
            f"free that much there {then}"
        ) from err
