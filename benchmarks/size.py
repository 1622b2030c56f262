"""``python -m benchmarks.size``: lines and code lines of ``app/`` outside its optional part folders.

The part folders are those copier.yml's ``part_files`` lists under ``app/`` (a project made from the
template has no copier.yml: all of its ``app/`` is counted). Code lines leave out blank, comment and
docstring lines. ``--count-in ema per_class`` counts those part folders in. ``--projects`` adds the
lines per folder of the template and of the projects copier makes with no optional part and with the
default ones, and ``--make-test`` the minutes of each one's ``make test``.
"""

import argparse
import ast
import io
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
import tokenize
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def part_folders() -> list[str]:
    """The names of ``app/``'s optional part folders, from copier.yml (none without it)."""
    copier = ROOT / "copier.yml"
    if not copier.is_file():
        return []
    parts = yaml.safe_load(copier.read_text())["part_files"]["default"].values()
    paths = [Path(path) for part in parts for path in part["paths"]]
    return [path.name for path in paths if path.parent == Path("app") and (ROOT / path).is_dir()]


def code_lines(source: str) -> int:
    """The lines of ``source`` that hold code: not blank, not only a comment, not in a docstring."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (*skipped, tokenize.ENDMARKER):
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


FOLDERS = ("app", "data", "models", "tests")


def lines_per_folder(root: Path) -> dict[str, int]:
    """``wc -l`` of the Python files in each of ``FOLDERS``."""
    return {
        folder: sum(len(f.read_text().splitlines()) for f in (root / folder).rglob("*.py"))
        for folder in FOLDERS
    }


def template_repository(template: Path) -> Path:
    """This checkout's files (tracked, or new and not ignored), committed in a repository of their own and
    tagged v1, as copier reads a template."""
    listed = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    for name in filter(
        None, subprocess.run(listed, cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    ):
        if (ROOT / name).is_file():
            (template / name).parent.mkdir(parents=True, exist_ok=True)
            (template / name).write_bytes((ROOT / name).read_bytes())
    git = ["git", "-c", "user.name=size", "-c", "user.email=size@example.invalid"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "v1"], ["tag", "v1"]):
        subprocess.run([*git, *command], cwd=template, check=True, capture_output=True)
    return template


def new_project(template: Path, project: Path, parts: list[str] | None) -> Path:
    """``copier copy --trust --defaults`` with ``parts`` (None: copier's default parts)."""
    data = ["--data", f"parts={json.dumps(parts)}"] if parts is not None else []
    copy = [sys.executable, "-m", "copier", "copy", "--trust", "--defaults", "--quiet", *data]
    subprocess.run([*copy, str(template), str(project)], check=True, capture_output=True)
    return project


def make_test_minutes(project: Path) -> float:
    """Minutes of ``make test`` in ``project`` (a made one: in a venv of its own on this one's packages, as
    ``tests/helpers/tree.py`` makes it, no second install)."""
    venv = project / ".venv"
    if project != ROOT:
        make_venv(venv)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    start = time.monotonic()
    done = subprocess.run(["make", "test"], cwd=project, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: make test failed in {project}:\n{done.stdout[-2000:]}")
    return (time.monotonic() - start) / 60


def make_venv(venv: Path) -> None:
    """A venv whose ``.pth`` names this one's site-packages (whose own ``.pth`` files it then skips)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    (purelib / "template.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for tool in ("ruff", "hadolint"):
        (venv / "bin" / tool).symlink_to(Path(sys.prefix) / "bin" / tool)
    (venv / ".installed").touch()


def projects(make_test: bool) -> None:
    """Print lines per folder (and ``make test`` minutes) of the template and its two projects."""
    with tempfile.TemporaryDirectory() as where:
        template = template_repository(Path(where) / "template")
        rows = {
            "template": ROOT,
            "no optional part": new_project(template, Path(where) / "minimal", []),
            "the default parts": new_project(template, Path(where) / "defaults", None),
        }
        print("| | " + " | ".join(FOLDERS) + " | all |" + (" make test, min |" if make_test else ""))
        for name, root in rows.items():
            counts = lines_per_folder(root)
            cells = [f"{counts[f]:,}" for f in FOLDERS] + [f"{sum(counts.values()):,}"]
            if make_test:
                cells.append(f"{make_test_minutes(root):.1f}")
            print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = part_folders()
    parser.add_argument("--count-in", nargs="*", default=[], choices=parts, help="part folders counted")
    parser.add_argument("--projects", action="store_true", help="the template's projects' sizes too")
    parser.add_argument("--make-test", action="store_true", help="with --projects: their make test times")
    args = parser.parse_args()
    left_out = [ROOT / "app" / part for part in parts if part not in args.count_in]
    found = sorted((ROOT / "app").rglob("*.py"))
    files = [f for f in found if not any(f.is_relative_to(d) for d in left_out)]
    sources = [f.read_text() for f in files]
    lines = sum(len(source.splitlines()) for source in sources)
    print(f"{len(files)} files, {lines} lines, {sum(map(code_lines, sources))} code lines")
    if args.projects:
        projects(args.make_test)


if __name__ == "__main__":
    main()
