"""The installed releases of what the project needs, for the features that need more than its floor."""

import re
from importlib.metadata import PackageNotFoundError, version


def installed(package: str) -> tuple[int, ...] | None:
    """The release of the installed ``package`` (``2.6.0+cu124``: ``(2, 6, 0)``), None where it is
    missing. The checks of a feature's floor read it here and nowhere else."""
    try:
        found = version(package)
    except PackageNotFoundError:
        return None
    return tuple(int(part) for part in re.match(r"\d+(?:\.\d+)*", found)[0].split("."))


def older(package: str, release: tuple[int, ...]) -> bool:
    """Whether the installed ``package`` is a release older than ``release``."""
    found = installed(package)
    return found is not None and found < release


def needs(package: str, release: tuple[int, ...]) -> str | None:
    """``PACKAGE >= RELEASE (PACKAGE X here)`` where the installed ``package`` is older, else None."""
    if not older(package, release):
        return None
    found = ".".join(map(str, installed(package)))
    return f"{package} >= {'.'.join(map(str, release))} ({package} {found} here)"
