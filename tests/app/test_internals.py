"""Private names of Lightning, jsonargparse and argparse are used in ``app/internals.py`` only."""

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import app

UPSTREAM = ("lightning", "jsonargparse", "argparse")
APP = Path(app.__file__).parent
# torch's private names, which internals.py does not gather (it is about Lightning's and jsonargparse's).
TORCH = {"_set_pg_timeout", "_Loss"}


def our_modules() -> list:
    names = [m.name for m in pkgutil.walk_packages([str(APP)], prefix="app.")]
    return [importlib.import_module(n) for n in names if n not in ("app.internals", "app.__main__")]


def test_no_class_outside_internals_overrides_a_private_method_of_lightning_or_jsonargparse():
    overrides = []
    for module in our_modules():
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            for name in vars(cls):
                if not name.startswith("_") or name.startswith("__") or name == "_abc_impl":
                    continue
                for base in cls.__mro__[1:]:
                    if base.__module__.split(".")[0] in UPSTREAM and name in vars(base):
                        overrides.append(f"{cls.__qualname__}.{name} ({base.__module__}.{base.__qualname__})")
    assert overrides == []


def test_no_module_outside_internals_reads_or_imports_another_librarys_private_name():
    found = []
    for path in sorted(APP.rglob("*.py")):
        if path.name == "internals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UPSTREAM:
                found += [f"{path.name}: import {a.name}" for a in node.names if a.name.startswith("_")]
            private = isinstance(node, ast.Attribute) and node.attr.startswith("_")
            if private and not node.attr.startswith("__") and node.attr not in TORCH:
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                    found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert found == []
