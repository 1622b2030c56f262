"""The installed releases that the features needing more than the project's floor check."""

import re
from importlib.metadata import PackageNotFoundError, distributions, version

# What a run's results depend on, recorded with each run (W&B's config panel, the CSV logger's hparams.yaml).
RECORDED = ("torch", "lightning", "torchvision", "torchmetrics")


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


def recorded() -> dict[str, str | None]:
    """The releases of the packages a run's results depend on and of this project, by the name it is
    installed under (the distribution holding ``app``; none where the project runs uninstalled)."""
    found = {package: _release(package) for package in RECORDED}
    # Read from the top_level.txt that setuptools writes: packages_distributions() reads every installed
    # package's list of files instead, 0.3-0.8 s of a fit's start on a 2-core VM.
    top = __name__.partition(".")[0]
    for project in distributions():
        if top in (project.read_text("top_level.txt") or "").split():
            found[project.metadata["Name"]] = project.version
    return found


def _release(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None
