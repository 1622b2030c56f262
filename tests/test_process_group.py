"""Importing the app has every process leave its process group before Python shuts down."""

import subprocess
import sys

from conftest import ROOT

# The first atexit handler registered runs last: it sees whether the group outlived the program.
PROGRAM = """
import atexit, sys, tempfile
import torch.distributed as dist
atexit.register(lambda: print("initialized at exit:", dist.is_initialized(), flush=True))
if sys.argv[1] == "app":
    import app
store = dist.FileStore(tempfile.mktemp(), 1)
dist.init_process_group("gloo", store=store, rank=0, world_size=1)
"""


def initialized_at_exit(imported: str) -> str:
    command = [sys.executable, "-c", PROGRAM, imported]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def test_the_gloo_group_is_destroyed_before_the_interpreter_exits():
    assert initialized_at_exit("nothing") == "initialized at exit: True"
    assert initialized_at_exit("app") == "initialized at exit: False"
