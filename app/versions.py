"""The installed releases that the features needing more than the project's floor check."""

import re
from importlib.metadata import PackageNotFoundError, version


def installed(package: str) -> tuple[int, ...] | None:
    """The installed ``package``'s release (``2.6.0+cu124``: ``(2, 6, 0)``), None where it is missing.
    Every check of a feature's floor reads it here (tests point it at other releases)."""
    try:
        return tuple(int(n) for n in re.match(r"\d+(?:\.\d+)*", version(package))[0].split("."))
    except PackageNotFoundError:
        return None


def needs(package: str, release: tuple[int, ...]) -> str | None:
    """``PACKAGE >= RELEASE (PACKAGE X here)`` where the installed ``package`` is older, else None."""
    found = installed(package)
    if found is None or found >= release:
        return None
    return f"{package} >= {'.'.join(map(str, release))} ({package} {'.'.join(map(str, found))} here)"
