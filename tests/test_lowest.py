"""scripts/lowest.py: the constraints `make test-lowest` installs, each requirement at its lower bound."""

import subprocess
import sys
from pathlib import Path

from helpers.cli import ROOT
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli there
    import tomli as tomllib

SCRIPT = ROOT / "scripts" / "lowest.py"


def lowest(*pyproject: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *pyproject], capture_output=True, text=True, timeout=60)


def test_every_requirement_of_the_project_and_of_dev_is_pinned_to_its_lower_bound():
    result = lowest()
    assert result.returncode == 0, result.stderr
    pins = dict(line.split("==") for line in result.stdout.splitlines())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    own = [Requirement(line) for line in extras["dev"] if Requirement(line).name == project["name"]]
    named = [line for req in own for extra in sorted(req.extras) for line in extras[extra]]
    for line in [*project["dependencies"], *extras["dev"], *named]:
        req = Requirement(line)
        if req.name != project["name"]:
            (bound,) = [s.version for s in req.specifier if s.operator in (">=", "==")]
            assert pins.pop(req.name) == bound, req
    assert pins == {}  # nothing else, and no requirement twice


def test_the_dev_extras_own_extras_are_followed_and_a_requirement_without_a_bound_is_refused(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "p"\ndependencies = ["a>=1.2,<2"]\n'
        '[project.optional-dependencies]\ndev = ["p[x]", "b~=3.1"]\nx = ["c==4"]\nother = ["d>=5"]\n'
    )
    assert lowest(pyproject).stdout.split() == ["a==1.2", "b==3.1", "c==4"]

    pyproject.write_text(
        '[project]\nname = "p"\ndependencies = ["a<2"]\n[project.optional-dependencies]\ndev = []\n'
    )
    result = lowest(pyproject)
    assert result.returncode != 0 and result.stdout == ""
    assert (
        result.stderr.strip()
        == "error: a<2 in pyproject.toml has no single lower bound (>=, ~= or ==) to test"
    )
