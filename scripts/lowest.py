"""Print pip constraints that pin each of pyproject.toml's requirements to its lower bound.

The dependencies and the dev extra's (with the extras it names of this project): ``make test-lowest``
installs with them and runs the tests, so the ranges pyproject.toml states are ranges that were tested.

python scripts/lowest.py [pyproject.toml] > lowest.txt
"""

import sys
from pathlib import Path

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # make test-lowest installs tomli there
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requirements(project: dict, extras: list[str]) -> list[Requirement]:
    """The dependencies and those of ``extras``, the project's own extras they name expanded in place."""
    found, todo, seen = [Requirement(r) for r in project["dependencies"]], list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in project["optional-dependencies"][extra]:
            req = Requirement(line)
            if req.name == project["name"]:
                todo += sorted(req.extras)
            else:
                found.append(req)
    return found


def lower_bound(req: Requirement) -> str:
    """``name==X`` for the version ``req``'s specifier starts at (``>=X``, ``~=X`` or ``==X``)."""
    bounds = [s.version for s in req.specifier if s.operator in (">=", "~=", "==")]
    if len(bounds) != 1:
        sys.exit(f"error: {req} in pyproject.toml has no single lower bound (>=, ~= or ==) to test")
    return f"{req.name}=={bounds[0]}"


if __name__ == "__main__":
    project = tomllib.loads(Path(sys.argv[1] if sys.argv[1:] else PYPROJECT).read_text())["project"]
    pins = {req.name.lower(): lower_bound(req) for req in requirements(project, ["dev"])}
    print("\n".join(pins[name] for name in sorted(pins)))
