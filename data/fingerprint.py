"""A short digest of the files a data set is read from, recorded with each run."""

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

# Bytes: files totalling up to this are hashed whole (SHA-256 of MNIST's 55 MB: 0.3 s, of CIFAR-10's
# 180 MB: 0.6 s, on one core of a shared 2-core CI machine); past it, a stat a file.
CONTENT_LIMIT = 256 << 20


def fingerprint(root: str | Path, files: Iterable[Path]) -> str | None:
    """16 hex digits of SHA-256 over ``files`` (those that exist), in order: each one's path under
    ``root``, its size and its bytes, so the same files give the same digest on any machine. Where they
    total more than :data:`CONTENT_LIMIT`, each one's modification time stands for its bytes (a stat a
    file, never gigabytes read), as the image folder's decoded copy is named. None where no file exists.
    """
    found = [(path, os.stat(path)) for path in files if os.path.isfile(path)]
    if not found:
        return None
    whole = sum(stat.st_size for _, stat in found) <= CONTENT_LIMIT
    digest = hashlib.sha256(b"content\n" if whole else b"mtime\n")
    for path, stat in found:
        name = os.path.relpath(path, root)
        if whole:
            content = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    content.update(chunk)
            own = content.hexdigest()
        else:
            own = str(stat.st_mtime_ns)
        digest.update(f"{name}\0{stat.st_size}\0{own}\n".encode())
    return digest.hexdigest()[:16]
