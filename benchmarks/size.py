"""``python -m benchmarks.size``: lines and code lines of ``app/`` outside its optional part folders.

The part folders are those copier.yml's ``part_files`` lists under ``app/`` (a project made from the
template has no copier.yml: all of its ``app/`` is counted). Code lines leave out blank, comment and
docstring lines. ``--count-in ema per_class`` counts those part folders in.
"""

import argparse
import ast
import io
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = part_folders()
    parser.add_argument("--count-in", nargs="*", default=[], choices=parts, help="part folders counted")
    args = parser.parse_args()
    left_out = [ROOT / "app" / part for part in parts if part not in args.count_in]
    found = sorted((ROOT / "app").rglob("*.py"))
    files = [f for f in found if not any(f.is_relative_to(d) for d in left_out)]
    sources = [f.read_text() for f in files]
    lines = sum(len(source.splitlines()) for source in sources)
    print(f"{len(files)} files, {lines} lines, {sum(map(code_lines, sources))} code lines")


if __name__ == "__main__":
    main()
