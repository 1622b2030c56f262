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
import sys
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


def make_test_minutes(project: Path) -> float:
    """Minutes of ``make test`` in ``project`` (a made one in a venv of its own on this one's packages:
    ``tests/helpers/tree.py``'s ``make_in``, no second install)."""
    from helpers.tree import make_in  # (tests/ is on the path: see projects)

    start = time.monotonic()
    done = make_in(project, "test", timeout=3600)
    if done.returncode != 0:
        sys.exit(f"error: make test failed in {project}:\n{done.stdout[-2000:]}")
    return (time.monotonic() - start) / 60


def projects(make_test: bool) -> None:
    """Print lines per folder (and ``make test`` minutes) of the template and its two projects."""
    with tempfile.TemporaryDirectory() as where:
        sys.path.insert(0, str(ROOT / "tests"))  # the template's own helpers (copier, a project's venv)
        from helpers.tree import new_project, template_repository

        template = template_repository(Path(where) / "template")
        rows = {
            "template": ROOT,
            "no optional part": new_project(template, Path(where) / "minimal", parts=[]),
            "the default parts": new_project(template, Path(where) / "defaults"),
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
