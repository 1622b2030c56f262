"""``python -m app tune``: a hyperparameter search (or a cross-validation) whose trials are fits.

Every flag but ``--tune.*`` is ``fit``'s; each trial is ``python -m app fit FLAGS --KEY=VALUE ...`` in its
own process, as a W&B agent runs it, so a trial can be a whole DDP job and no rank draws its own values.
The study lives in ``ROOT/tune/NAME/`` (ROOT: ``--trainer.default_root_dir``).
"""

import signal
import sys

from app.errors import USER_ERRORS, fail
from app.tune.search import Tune


class Stop(Exception):
    """A signal asked this process to end."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def main(args: list[str]) -> None:
    """Run ``python -m app tune ARGS``; a problem the user can fix ends in one ``error:`` line."""
    signal.signal(signal.SIGTERM, raise_stop)
    # The flags are parsed from a list: LightningCLI warns where argv holds them too.
    sys.argv = sys.argv[:1]
    try:
        Tune(args).run()
    except USER_ERRORS as err:
        fail(str(err))
    except (Stop, KeyboardInterrupt) as stop:
        signum = stop.signum if isinstance(stop, Stop) else signal.SIGINT
        sys.stderr.write("tune: stopped; run the same command again to resume the study\n")
        sys.exit(128 + signum)


def raise_stop(signum: int, frame: object) -> None:
    raise Stop(signum)
