"""The workarounds of a library's behaviour in ``app/``, ``data/`` and ``models/``: each carries one comment
``# workaround: UPSTREAM ISSUE OR RELEASE; gone when CONDITION``, and ``docs/contributing.md`` lists them
between two markers (``python scripts/workarounds.py`` writes the list)."""

import re
from pathlib import Path

from helpers.cli import ROOT

MARK = re.compile(r"^\s*# workaround: (.+)$")
DOC = ROOT / "docs" / "contributing.md"
BEGIN, END = "<!-- workarounds: python scripts/workarounds.py -->", "<!-- /workarounds -->"


def markers(root: Path = ROOT) -> list[tuple[str, str]]:
    """``(file, text)`` of each marker, in path order."""
    found = []
    for path in sorted(p for folder in ("app", "data", "models") for p in (root / folder).rglob("*.py")):
        for line in path.read_text().splitlines():
            if match := MARK.match(line):
                found.append((str(path.relative_to(root)), match[1].strip()))
    return found


def listed(markers: list[tuple[str, str]]) -> str:
    """The list as ``docs/contributing.md`` holds it, the markers included."""
    rows = "".join(f"- `{path}`: {text}\n" for path, text in markers)
    return f"{BEGIN}\n{rows}{END}"


def in_doc(text: str) -> str:
    """The list as it stands in the doc's ``text``."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]
