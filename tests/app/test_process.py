"""Importing the app changes nothing in the process; the CLI tunes glibc's malloc and the garbage
collector when it starts."""

import subprocess
import sys

import pytest
from helpers.page_faults import ROOT, STEPS, run_python

from app.process import keep_freed_memory

# Imports every module of app, models and data, after the third-party modules they import, and prints
# what changed in the process: exit handlers, signal handlers, warnings filters, log filters, strategies.
# The test appends STEPS: the page faults of a step in that process, with all of it imported.
IMPORT_ALL = """
import ast, atexit, importlib, importlib.util, logging, pathlib, pkgutil, signal, sys, warnings
ours = ("app", "models", "data")
files = [p for package in ours for p in pathlib.Path(package).rglob("*.py")]
for file in files:
    for node in ast.walk(ast.parse(file.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for name in names:
            top = name.split(".")[0]
            if top not in ours and importlib.util.find_spec(top):  # an optional extra (timm) may be absent
                importlib.import_module(name)
from lightning.pytorch.strategies import StrategyRegistry
def state():
    valid = set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
    signals = {s: signal.getsignal(s) for s in valid}
    known = logging.root.manager.loggerDict.items()
    loggers = {n: list(l.filters) for n, l in known if getattr(l, "filters", None)}
    hooks = atexit._ncallbacks(), sys.unraisablehook
    return *hooks, signals, list(warnings.filters), loggers, sorted(StrategyRegistry)
before = state()
for package in ours:
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        if not info.name.endswith("__main__"):  # that one runs the CLI
            importlib.import_module(info.name)
after = state()
names = [
    "exit handlers", "unraisable hook", "signal handlers", "warnings filters", "log filters", "strategies"
]
print([name for name, a, b in zip(names, before, after) if a != b])
"""


@pytest.mark.full
def test_importing_app_models_and_data_changes_nothing_process_wide():
    changed, imported = run_python(IMPORT_ALL + STEPS).splitlines()
    assert changed == "[]"
    # glibc's malloc keeps its defaults: it trims freed memory, and steps fault their blocks in again.
    assert int(imported) > int(run_python(STEPS)) / 2


# The CLI's start in a process with torch and Lightning imported: the objects each full garbage collection
# walks (and the one at the interpreter's exit) before and after it, how many it set aside; then STEPS.
PREPARED = """
import gc, torch, lightning, app.process
walked = len(gc.get_objects())
app.process.prepare()
print(walked, len(gc.get_objects()), gc.get_freeze_count())
"""


@pytest.mark.full
def test_the_cli_keeps_freed_memory_and_leaves_what_was_imported_out_of_garbage_collections():
    plain = int(run_python(STEPS))
    collected, tuned = run_python(PREPARED + STEPS).splitlines()
    print(f"page faults over 20 steps: glibc's defaults {plain}, after the CLI's settings {tuned}")
    assert plain > 20 * 40 * 128 // 2  # glibc trimmed the heap and faulted the blocks in again
    assert int(tuned) < plain / 5
    before, after, set_aside = map(int, collected.split())
    assert before > 100_000  # torch's and Lightning's modules
    assert after < before / 10 and set_aside > before * 0.9


def test_the_users_allocator_settings_are_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000000")
    assert keep_freed_memory() is False


# A loader whose worker dies, iterated in a __del__: what raises there, Python prints as "Exception ignored".
DEAD_WORKER_IN_DEL = """
import os, sys, torch.utils.data
class Dies(torch.utils.data.Dataset):
    def __len__(self):
        return 1
    def __getitem__(self, i):
        os._exit(1)
class Holder:
    def __del__(self):
        next(iter(torch.utils.data.DataLoader(Dies(), num_workers=1)))
class Other:
    def __del__(self):
        raise RuntimeError("a bug of ours")
if sys.argv[1] == "cli":
    import app.process; app.process.prepare()
Holder(); Other()
"""


@pytest.mark.full
def test_the_cli_prints_no_traceback_for_a_dead_workers_echo_and_still_prints_others():
    def stderr(mode: str) -> str:
        run = [sys.executable, "-c", DEAD_WORKER_IN_DEL, mode]
        return subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=True).stderr

    plain, cli = stderr("plain"), stderr("cli")
    assert plain.count("Exception ignored") == 2 and "DataLoader worker" in plain, plain
    assert cli.count("Exception ignored") == 1 and "a bug of ours" in cli and "DataLoader" not in cli, cli
