"""Run by :func:`helpers.tree.check_it_runs` in a project made from the template, as ``python -S -c`` with
the project's packages only: its CLI's help, its config and a brief fit, then the collection of its tests,
all in one process. Prints one JSON line: each step's exit status and output.

Argument: JSON ``{"config": [ARGS of fit --print_config], "fit": [ARGS of fit]}``.
"""

import contextlib
import io
import json
import sys

import pytest

from app.cli import main


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


args = json.loads(sys.argv[1])
results = {
    "help": run(main, ["--help"]),
    "config": run(main, ["fit", "--print_config", *args["config"]]),
    "fit": run(main, ["fit", *args["fit"]]),
    # The tests left still load; those that need a dropped part skip when they run.
    "collect": run(pytest.main, ["--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", "tests"]),
}
print(json.dumps(results))
