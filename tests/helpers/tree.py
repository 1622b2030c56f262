"""The template as a template: its files in a git repository of their own, copier run on it, its optional
parts as copier.yml defines them, and the checks that a project made from it runs."""

import ast
import atexit
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
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
    """``{part: {"paths": [...], "line": {"file": ..., "naming": ...}}}`` (``line`` where it has one, a list
    where it has two: see :func:`lines_of`)."""
    return yaml.safe_load((ROOT / "copier.yml").read_text())["part_files"]["default"]


def lines_of(part: dict) -> list[dict]:
    """The lines elsewhere that plug ``part`` in, ``{"file": ..., "naming": ...}`` each."""
    line = part.get("line", [])
    return line if isinstance(line, list) else [line]


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


@functools.cache
def project_checker() -> subprocess.Popen:
    """``helpers/project_check.py``, started once in this process: the libraries on site-packages only
    (``-S``: see :func:`python_in`), each project's checks in a fork of it."""
    env = {**app_env(), "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    script = (ROOT / "tests" / "helpers" / "project_check.py").read_text()
    checker = subprocess.Popen(
        [sys.executable, "-S", "-c", script],
        cwd=tempfile.gettempdir(),
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    atexit.register(checker.stdin.close)
    return checker


def check_it_runs(
    project: Path, data_root: Path, *fit_args: str, data_class: str = "data.MNISTDataModule"
) -> None:
    """The project's CLI prints its help and config (``data_class`` in it) and trains briefly on
    ``data_root``; its tests load. A process of its own does all four (:func:`project_checker`)."""
    # A --config first: one after them would put its values over the flags before it.
    configs = [arg for arg in fit_args if arg.startswith("--config=")]
    rest = [arg for arg in fit_args if arg not in configs]
    args = {"config": list(fit_args), "fit": [*configs, *SHRINK, f"--data.root={data_root}", *rest]}
    out = project.parent / f"{project.name}-check.json"
    checker = project_checker()
    checker.stdin.write(json.dumps({"project": str(project), "args": args, "out": str(out)}) + "\n")
    checker.stdin.flush()
    status = checker.stdout.readline()
    printed = Path(f"{out}.stderr")  # the fork's stdout and stderr
    stderr = printed.read_text() if printed.exists() else ""
    assert status.strip() == "0", f"the check process ended with {status!r}:\n{stderr[-3000:]}"
    results = json.loads(out.read_text())
    assert results["help"]["code"] == 0 and "fit" in results["help"]["stdout"], stderr[-2000:]
    assert results["config"]["code"] == 0, stderr[-2000:]
    assert f"class_path: {data_class}\n" in results["config"]["stdout"]
    assert results["fit"]["code"] == 0, stderr[-2000:]
    assert list((project / "runs").glob("*/version_0/checkpoints/*.ckpt"))
    assert results["collect"]["code"] == 0, results["collect"]["stdout"][-3000:]


def train_config(project: Path) -> str:
    """The preset ``make train`` trains in ``project`` (its Makefile's)."""
    return re.search(r"-m app fit --config (\S+)", (project / "Makefile").read_text())[1]


def make_in(project: Path, *targets: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``make TARGETS`` in ``project``, in a venv of its own on this one's packages (no second install):
    a ``.pth`` file names this venv's site-packages, whose own ``.pth`` files (the editable install's,
    which would bring this checkout's packages back) are then not read."""
    venv = project / ".venv"
    if not venv.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        paths = {"base": str(venv), "platbase": str(venv)}
        (Path(sysconfig.get_paths(vars=paths)["purelib"]) / "template.pth").write_text(
            sysconfig.get_paths()["purelib"] + "\n"
        )
        for tool in ("ruff", "hadolint"):  # the linters' binaries, which their modules look for here
            (venv / "bin" / tool).symlink_to(Path(sys.prefix) / "bin" / tool)
        (venv / ".installed").touch()
    env = {key: value for key, value in app_env().items() if key != "PYTHONPATH"}
    return subprocess.run(
        ["make", *targets], cwd=project, env=env, capture_output=True, text=True, timeout=timeout
    )


NOT_WALKED = ("tests", ".git", "runs")  # and .venv*


def own_files(root: Path, pattern: str) -> list[Path]:
    """The files named by ``pattern`` in a project, outside ``tests/``, its venvs (``make setup``'s,
    ``make test-lowest``'s), ``.git`` and what its runs wrote: folders not walked at all."""
    found = list(root.glob(pattern))
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and not folder.name.startswith(".venv") and folder.name not in NOT_WALKED:
            found += folder.rglob(pattern)
    return [path for path in found if path.is_file()]


def used_names(root: Path) -> set[str]:
    """Every name the code outside ``tests/`` uses (names, attributes, imports, words of its strings), and
    every word of its configs and make files: where a function or class can be called from."""
    names = set()
    for path in own_files(root, "*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.rsplit(".", 1)[-1])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(re.findall(r"\w+", node.value))
    for path in [*root.glob("configs/**/*.yaml"), *own_files(root, "*.mk"), root / "Makefile"]:
        if path.is_file():
            names.update(re.findall(r"\w+", path.read_text()))
    return names


def defined(root: Path) -> dict[str, str]:
    """The functions and classes defined at the top of the modules of ``app``, ``data`` and ``models``."""
    found = {}
    modules = sorted(path for folder in ("app", "data", "models") for path in (root / folder).rglob("*.py"))
    for path in modules:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found[node.name] = str(path.relative_to(root))
    return found


def left_behind(project: Path, dropped: list[str], every: dict[str, dict]) -> list[str]:
    """What stays of the ``dropped`` parts in ``project``: each function or class the template uses but the
    project does not (its callers went with them), and each line outside ``tests/`` naming a dropped part's
    package (``app/tune``, ``app.tune``) but for one saying it is missing or how to add it back."""
    used, used_in_template = used_names(project), template_used()
    found = [
        f"{name} ({path}): nothing calls it"
        for name, path in defined(project).items()
        if name not in used and name in used_in_template
    ]
    packages = {
        form
        for name in dropped
        for path in every[name]["paths"]
        if path.startswith(("app/", "data/"))
        for form in (path.removesuffix(".py"), path.removesuffix(".py").replace("/", "."))
    }
    if packages:
        # Not within another path (tests/app/tune, a guarded test list's): the package itself.
        naming = re.compile("|".join(rf"(?<![\w/.]){re.escape(package)}\b" for package in sorted(packages)))
        for path in own_files(project, "*"):
            relative = path.relative_to(project)
            try:
                lines = path.read_text().splitlines()
            except UnicodeDecodeError:
                continue
            found += [
                f"{relative}:{number}: {line.strip()}"
                for number, line in enumerate(lines, 1)
                if naming.search(line) and not MISSING_OR_ADD_BACK.search(line)
            ]
    return found


# A line that names a dropped part to say it is not there, how to bring it back, or that it is optional (a
# guarded use), is no leftover.
MISSING_OR_ADD_BACK = re.compile(r"made without|was dropped|copier update|add it back|an optional part")


@functools.cache
def template_used() -> frozenset[str]:
    """The names the template's own code uses."""
    return frozenset(used_names(ROOT))
