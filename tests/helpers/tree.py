"""The template as a template: its files in a git repository of their own, copier run on it, its optional
parts as copier.yml defines them, and the checks that a project made from it runs."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from helpers.cli import ROOT, SHRINK, app_env

# copier is a dev tool, absent from a GPU image: the tests that need it skip there, and say why, rather
# than stop pytest from collecting the rest.
run_copy = pytest.importorskip("copier", reason="copier is not installed (pip install copier)").run_copy

# Whose commits the tests' repositories hold: copier commits in repositories of its own too, and CI's
# machines have no git identity.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Template Tests",
    "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "Template Tests",
    "GIT_COMMITTER_EMAIL": "tests@example.invalid",
}


def copy_of_the_tree(project: Path) -> None:
    """The project's files (tracked, or new and not ignored) under ``project``."""
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"]
    for name in subprocess.run(listed, cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, project / name)


def parts() -> dict[str, dict]:
    """``{part: {"paths": [...], "line": {"file": ..., "naming": ...}}}`` (``line`` where it has one)."""
    return yaml.safe_load((ROOT / "copier.yml").read_text())["part_files"]["default"]


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo``; its output."""
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def commit_all(repo: Path, message: str, tag: str | None = None) -> None:
    """Commit everything in ``repo`` (made a repository if it is not one), tagged ``tag``."""
    if not (repo / ".git").exists():
        git(repo, "init", "--quiet", "--initial-branch=main")
        git(repo, "config", "user.name", GIT_ENV["GIT_AUTHOR_NAME"])
        git(repo, "config", "user.email", GIT_ENV["GIT_AUTHOR_EMAIL"])
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--message", message)
    if tag:
        git(repo, "tag", tag)


def template_repository(where: Path) -> Path:
    """The template's files in a git repository at ``where``, tagged v1, as copier reads a template."""
    copy_of_the_tree(where)
    commit_all(where, "v1", tag="v1")
    return where


def copier(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The ``copier`` command line, as a user runs it."""
    command = [sys.executable, "-m", "copier", *args]
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def new_project(template: Path, project: Path, **answers) -> Path:
    """``copier copy --trust --defaults`` with ``answers``, through copier's Python API (what its command
    line calls); the project's folder."""
    saved = dict(os.environ)
    os.environ.update(GIT_ENV)
    try:
        run_copy(str(template), project, data=answers, defaults=True, unsafe=True, quiet=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return project


def python_in(project: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``project`` with its own packages only.

    Python starts without site's .pth files (-S), the editable install's among them: its finder would
    bring this checkout's packages (a part the project dropped, say) back.
    """
    path = [project, project / "tests", sysconfig.get_paths()["purelib"]]
    env = {**app_env(), "PYTHONPATH": os.pathsep.join(map(str, path))}
    command = [sys.executable, "-S", *args]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=timeout)


def check_it_runs(project: Path, mnist_root: Path, *fit_args: str) -> None:
    """The project's CLI prints its help and config and trains briefly; its tests load. One process
    (``helpers/project_check.py``) does all four."""
    args = {"config": list(fit_args), "fit": [*SHRINK, f"--data.root={mnist_root}", *fit_args]}
    script = (ROOT / "tests" / "helpers" / "project_check.py").read_text()
    done = python_in(project, "-c", script, json.dumps(args))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["help"]["code"] == 0 and "fit" in results["help"]["stdout"], done.stderr[-2000:]
    assert results["config"]["code"] == 0, done.stderr[-2000:]
    assert "class_path: data.MNISTDataModule" in results["config"]["stdout"]
    assert results["fit"]["code"] == 0, done.stderr[-2000:]
    assert list((project / "runs").glob("*/version_0/checkpoints/*.ckpt"))
    assert results["collect"]["code"] == 0, results["collect"]["stdout"][-3000:]
