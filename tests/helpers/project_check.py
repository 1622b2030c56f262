"""Run by :func:`helpers.tree.check_it_runs`, as ``python -S -c`` with the site-packages only: in a
project made from the template, its CLI's help, its config and a brief fit, then the collection of its
tests, in a process of their own (forked from this one) with that project's packages only.

This process imports the libraries every project shares (torch, Lightning, pytest) once, then reads a
JSON request a line, ``{"project": DIR, "args": {"config": [...], "fit": [...]}, "out": FILE}``: the
fork writes each step's exit status and output to ``FILE``, what it printed to ``FILE.stderr``; this
answers with the fork's exit status, a line. Forked, each project's modules are its own, as in a new
process, without paying the libraries' import (5 s) again.
"""

import contextlib
import io
import json
import os
import sys
import threading
import traceback

import jsonargparse  # noqa: F401  (the shared libraries: imported once, before any fork)
import lightning  # noqa: F401
import pytest
import torch  # noqa: F401
import torchvision  # noqa: F401


def run(step, *args) -> dict:
    """``step(*args)`` with its stdout caught: its exit status (a ``SystemExit``'s, or 0) and output."""
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            returned = step(*args)
            code = returned if isinstance(returned, int) else 0
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    return {"code": int(code), "stdout": out.getvalue()}


def check(project: str, args: dict) -> dict:
    os.chdir(project)
    sys.path[:0] = [project, os.path.join(project, "tests")]
    from app.cli import main

    return {
        "help": run(main, ["--help"]),
        "config": run(main, ["fit", "--print_config", *args["config"]]),
        "fit": run(main, ["fit", *args["fit"]]),
        # The tests left still load; those that need a dropped part skip when they run.
        "collect": run(pytest.main, ["--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", "tests"]),
    }


def forked(request: dict) -> int:
    """The checks of ``request`` in a fork; its exit status."""
    # A fork copies only the thread calling it: one with others running could inherit a held lock.
    assert threading.active_count() == 1, "a library started a thread at import: fork is not safe"
    pid = os.fork()
    if pid == 0:  # the fork: it ends as a process does (its exit handlers run: W&B's, say)
        status = 1
        try:
            with open(request["out"] + ".stderr", "w") as err:
                os.dup2(err.fileno(), 1)
                os.dup2(err.fileno(), 2)
            results = check(request["project"], request["args"])
            with open(request["out"], "w") as f:
                json.dump(results, f)
            status = 0
        except BaseException:
            traceback.print_exc()
        sys.exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


for line in sys.stdin:
    print(forked(json.loads(line)), flush=True)
