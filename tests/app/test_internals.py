"""Private names of Lightning, jsonargparse and torch.distributed: at most five, in ``internals.py`` only.

torch's ``_BatchNorm`` and ``_InstanceNorm`` base classes (and the ``_check_input_dim`` their subclasses
override), which torchvision's own recipes use too, and ``nn.modules.loss._Loss`` do not count.
"""

import ast
import importlib
import inspect
import warnings
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

import app
from app.distributed.job import leave_process_group
from app.internals import set_collective_timeout

UPSTREAM = ("lightning", "jsonargparse", "argparse", "torch")
# The norm layers' base classes torchvision's recipes use (set_weight_decay), and Python's ABC machinery.
ALLOWED = {"_BatchNorm", "_InstanceNorm", "_check_input_dim", "_Loss", "_abc_impl"}
PROJECT = Path(app.__file__).parents[1]
LIMIT = 5


def private_names(path: Path) -> list[str]:
    """The private names ``path`` imports from an upstream package, or reads as an attribute of something that
    is not ``self``/``cls``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UPSTREAM:
            found += [a.name for a in node.names if a.name.startswith("_")]
        private = isinstance(node, ast.Attribute) and node.attr.startswith("_") and node.attr[:2] != "__"
        if private and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.append(node.attr)
    return [name for name in found if name not in ALLOWED]


def overrides(module_name: str) -> list[str]:
    """The private methods an upstream base class defines that a class of the module defines again."""
    module = importlib.import_module(module_name)
    found = []
    for cls in vars(module).values():
        if not inspect.isclass(cls) or cls.__module__ != module.__name__:
            continue
        for name in vars(cls):
            if name.startswith("_") and not name.startswith("__") and name not in ALLOWED:
                upstream = [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] in UPSTREAM]
                found += [name for base in upstream if name in vars(base)][:1]
    return found


def test_private_names_are_few_and_in_internals_only():
    outside = {}
    for folder in ("app", "data", "models"):
        for path in sorted((PROJECT / folder).rglob("*.py")):
            module = ".".join(path.relative_to(PROJECT).with_suffix("").parts).removesuffix(".__init__")
            names = private_names(path) + ([] if module == "app.__main__" else overrides(module))
            if names and path.name != "internals.py":  # the core's, or an optional part's own
                outside[str(path.relative_to(PROJECT))] = names
    assert outside == {}
    assert (
        len({name for path in PROJECT.glob("app/**/internals.py") for name in private_names(path)}) <= LIMIT
    )


def test_the_check_sees_a_private_name_and_an_override(tmp_path, monkeypatch):
    """The control: a reach into torch.distributed's privates, and an override of Lightning's, are found."""
    (tmp_path / "reaching.py").write_text(
        "import torch.distributed as dist\n\ndist.distributed_c10d._set_pg_timeout(None)\n"
    )
    assert private_names(tmp_path / "reaching.py") == ["_set_pg_timeout"]
    (tmp_path / "overriding.py").write_text(
        "from lightning.pytorch.strategies import DDPStrategy\n\n\n"
        "class Mine(DDPStrategy):\n    def _configure_launcher(self):\n        pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert overrides("overriding") == ["_configure_launcher"]


def test_the_collective_timeout_is_set_without_a_deprecated_name(tmp_path):
    """On every torch pyproject allows; its effect on a hung rank: tests/app/distributed/test_no_hangs.py."""
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # torch deprecates the private name where the public one exists
            set_collective_timeout(timedelta(seconds=7))
        dist.barrier()
    finally:
        leave_process_group()
