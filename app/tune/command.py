"""``python -m app tune``: a hyperparameter search (or a cross-validation) whose trials are fits.

Every flag but ``--tune.*`` is ``fit``'s; each trial is ``python -m app fit FLAGS --KEY=VALUE ...`` in its
own process, as a W&B agent runs it, so a trial can be a whole DDP job and no rank draws its own values.
The study lives in ``ROOT/tune/NAME/`` (ROOT: ``--trainer.default_root_dir``).
"""

import dataclasses
import difflib
import signal
import sys

from jsonargparse import ArgumentError, ArgumentParser

from app.errors import USER_ERRORS, UsageError, fail
from app.tune.options import Options
from app.tune.search import Tune


class Stop(Exception):
    """A signal asked this process to end."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def split(args: list[str]) -> tuple[list[str], list[str]]:
    """``args`` parted into the ``--tune.*`` flags (and help) and fit's."""
    tune, rest, i = [], [], 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--tune.") or arg in ("-h", "--help"):
            tune.append(arg)
            takes_value = "=" not in arg and arg.startswith("--tune.") and i + 1 < len(args)
            if takes_value and not args[i + 1].startswith("--"):
                tune.append(args[i + 1])
                i += 1
        else:
            rest.append(arg)
        i += 1
    return tune, rest


def parse(args: list[str]) -> Options:
    parser = ArgumentParser(
        prog="python -m app tune", exit_on_error=False, allow_abbrev=False, description=Options.__doc__
    )
    parser.add_class_arguments(Options, "tune")
    try:
        return parser.instantiate_classes(parser.parse_args(args)).tune
    except ArgumentError as err:
        known = [f"tune.{field.name}" for field in dataclasses.fields(Options)]
        given = [arg.removeprefix("--").split("=", 1)[0] for arg in args if arg.startswith("--tune.")]
        close = [m for key in given if key not in known for m in difflib.get_close_matches(key, known, n=1)]
        hint = f"; close: {', '.join('--' + key for key in close)}" if close else ""
        raise UsageError(" ".join(str(err).split()) + hint) from None


def main(args: list[str]) -> None:
    """Run ``python -m app tune ARGS``; a problem the user can fix ends in one ``error:`` line."""
    tune_args, fit_args = split(args)
    signal.signal(signal.SIGTERM, raise_stop)
    sys.argv = sys.argv[
        :1
    ]  # fit's flags are parsed from a list: LightningCLI warns where argv holds them too
    try:
        options = parse(tune_args)
        Tune(options, fit_args).run()
    except USER_ERRORS as err:
        fail(str(err))
    except (Stop, KeyboardInterrupt) as stop:
        signum = stop.signum if isinstance(stop, Stop) else signal.SIGINT
        sys.stderr.write("tune: stopped; run the same command again to resume the study\n")
        sys.exit(128 + signum)


def raise_stop(signum: int, frame: object) -> None:
    raise Stop(signum)
