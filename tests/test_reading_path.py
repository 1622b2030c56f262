"""The README's reading path of one training step: at most 6 files and 450 lines, every name in it real."""

import ast
import re

from helpers.cli import ROOT


def reading_path() -> list[tuple[str, list[str]]]:
    """``[(file, [Name or Class.method, ...])]`` from the README's numbered list under "## Layout"."""
    section = (ROOT / "README.md").read_text().split("## Layout\n", 1)[1].split("```", 1)[0]
    entries = re.findall(r"^\d+\. `([^`]+)`:(.*)$", section, re.MULTILINE)
    return [(file, re.findall(r"`([\w.]+)`", names)) for file, names in entries]


def lines_of(file: str, name: str) -> int:
    """Lines of the class, function or ``Class.method`` ``name`` in ``file``, decorators included."""
    nodes = ast.parse((ROOT / file).read_text()).body
    for part in name.split("."):
        found = [n for n in nodes if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == part]
        assert found, f"the README's reading path names {name} in {file}, which has none"
        node = found[0]
        nodes = node.body
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return node.end_lineno - first + 1


def test_one_training_step_reads_in_six_files_and_450_lines():
    path = reading_path()
    assert path[0][0] == "configs/defaults.yaml" and len(path) <= 6
    total = 0
    for file, names in path:
        if file.endswith(".yaml"):
            total += len((ROOT / file).read_text().splitlines())
        else:
            assert names, f"{file}: the reading path names what to read in it"
            total += sum(lines_of(file, name) for name in names)
    assert total <= 450, f"the reading path is {total} lines"
