"""Each rank that ran the Trainer leaves its process group before Python shuts down."""

import subprocess
import sys

import pytest
from helpers.cli import ROOT

# The first atexit handler registered runs last: it sees whether the group outlived the program.
PROGRAM = """
import atexit, sys, tempfile
import torch.distributed as dist
atexit.register(lambda: print("initialized at exit:", dist.is_initialized(), flush=True))
store = dist.FileStore(tempfile.mktemp(), 1)
dist.init_process_group("gloo", store=store, rank=0, world_size=1)
if sys.argv[1] == "setup":  # what the Trainer calls on every rank, spawned ones too
    from app.distributed.job import DistributedJob
    DistributedJob().setup(None, None, "fit")
"""


def initialized_at_exit(hook: str) -> str:
    command = [sys.executable, "-c", PROGRAM, hook]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.full
def test_the_gloo_group_is_destroyed_before_the_interpreter_exits():
    assert initialized_at_exit("none") == "initialized at exit: True"
    assert initialized_at_exit("setup") == "initialized at exit: False"
