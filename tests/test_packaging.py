"""Packaging: pyproject's entry points, pre-commit and the GitHub workflow (Docker: test_docker.py)."""

import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from helpers.cli import ROOT

from app.cli import commands_for

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli there
    import tomli as tomllib

BIN = Path(sys.executable).parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def pinned(package: str) -> str:
    """The version that the dev extra pins ``package`` to."""
    (spec,) = [s for s in PYPROJECT["project"]["optional-dependencies"]["dev"] if s.startswith(package)]
    return spec.split("==")[1]


def test_pre_commit_runs_the_pinned_ruff():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    (ruff,) = [r for r in config["repos"] if r["repo"] == "https://github.com/astral-sh/ruff-pre-commit"]
    assert ruff["rev"] == f"v{pinned('ruff')}" == f"v{version('ruff')}"
    assert {hook["id"] for hook in ruff["hooks"]} == {"ruff-check", "ruff-format"}


def test_github_workflow_runs_our_ci_script():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert {"push", "pull_request"} <= set(triggers)
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    setup = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python")]
    assert [str(s["with"]["python-version"]) for s in setup] == ["3.11"]
    assert [s["run"].strip() for s in job["steps"] if "run" in s] == ["bash .ci/run"]
    assert (ROOT / ".ci" / "run").is_file()


def test_extras_are_declared():
    extras = {
        name: {re.split(r"[<>=;\s\[]", spec)[0] for spec in specs}
        for name, specs in PYPROJECT["project"]["optional-dependencies"].items()
    }
    assert extras["dev"] >= {"pytest", "ruff"}
    if (ROOT / "app" / "export").is_dir():  # the export part, where the project has it
        assert extras["export"] == {"onnx", "onnxruntime", "onnxscript"}
    assert extras["timm"] == {"timm"}
    assert PYPROJECT["project"]["name"] in extras["dev"]  # [timm,...]: CI tests every extra
    assert PYPROJECT["project"]["scripts"] == {"app": "app.cli:main"}


@pytest.mark.full
def test_console_script_and_module_print_the_same_help(tmp_path):
    # Outside the repository and without PYTHONPATH: only the installed project can answer.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    commands = [[str(BIN / "app"), "--help"], [sys.executable, "-m", "app", "--help"]]
    runs = [
        subprocess.Popen(c, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c in commands
    ]
    (script, script_err), (module, module_err) = (run.communicate(timeout=120) for run in runs)
    assert [run.returncode for run in runs] == [0, 0], script_err + module_err
    # argparse names the program after argv[0]: `app`, or `__main__.py` under `python -m`.
    listed = "{" + ",".join(commands_for([])) + "}"  # Lightning's and the optional parts' present here
    assert script.startswith("usage: app ") and listed in script, script[:300]
    # The longer name may wrap the usage line elsewhere: the same words in the same order.
    assert re.sub(r"^usage: \S+", "usage: app", module).split() == script.split()
