"""Importing the app changes nothing in the process; the CLI tunes glibc's malloc when it starts."""

import subprocess
import sys

from helpers.cli import ROOT

from app.allocator import keep_freed_memory

# A step's pattern: 40 blocks of 512 kB allocated, written and freed, 20 times over, after a 1 MB
# block freed once has set glibc's dynamic thresholds. Prints the page faults of the 20 steps.
STEPS = """
import ctypes, resource
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
block = libc.malloc(1 << 20); libc.memset(block, 1, 1 << 20); libc.free(block)
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    blocks = [libc.malloc(512 << 10) for _ in range(40)]
    for b in blocks:
        libc.memset(b, 1, 512 << 10)
    for b in blocks:
        libc.free(b)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
"""

# Imports every module of app, models and data, after the third-party modules they import, and prints
# what changed in the process: exit handlers, signal handlers, warnings filters, log filters, strategies.
IMPORT_ALL = """
import ast, atexit, importlib, logging, pathlib, pkgutil, signal, sys, warnings
ours = ("app", "models", "data")
files = [p for package in ours for p in pathlib.Path(package).rglob("*.py")]
for file in files:
    for node in ast.walk(ast.parse(file.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for name in names:
            if name.split(".")[0] not in ours:
                importlib.import_module(name)
from lightning.pytorch.strategies import StrategyRegistry
def state():
    valid = set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
    signals = {s: signal.getsignal(s) for s in valid}
    known = logging.root.manager.loggerDict.items()
    loggers = {n: list(l.filters) for n, l in known if getattr(l, "filters", None)}
    return atexit._ncallbacks(), signals, list(warnings.filters), loggers, sorted(StrategyRegistry)
before = state()
for package in ours:
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        if not info.name.endswith("__main__"):  # that one runs the CLI
            importlib.import_module(info.name)
after = state()
names = ["exit handlers", "signal handlers", "warnings filters", "log filters", "strategies"]
print([name for name, a, b in zip(names, before, after) if a != b])
"""


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_importing_app_models_and_data_changes_nothing_process_wide():
    assert run_python(IMPORT_ALL) == "[]"
    # glibc's malloc keeps its defaults: it trims freed memory, and steps fault their blocks in again.
    plain = int(run_python(STEPS))
    imported = int(run_python("import app, app.cli, models, data\n" + STEPS))
    assert imported > plain / 2


def test_the_cli_keeps_freed_memory_for_the_next_step():
    plain = int(run_python(STEPS))
    tuned = int(run_python("import app.process; app.process.prepare()\n" + STEPS))
    print(f"page faults over 20 steps: glibc's defaults {plain}, after the CLI's settings {tuned}")
    assert plain > 20 * 40 * 128 // 2  # glibc trimmed the heap and faulted the blocks in again
    assert tuned < plain / 5


def test_the_users_allocator_settings_are_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000000")
    assert keep_freed_memory() is False
