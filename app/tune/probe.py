"""fit's flags read in this process, as ``python -m app fit`` reads them, before any trial runs: every key of
the space an option of fit, each end of its range a value fit takes, the metric one the model logs."""

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonargparse import Namespace
from optuna.distributions import BaseDistribution, CategoricalDistribution

from app.cli import CLI, build
from app.errors import UsageError
from app.tune.identity import flatten
from app.tune.space import Space
from app.tune.trial import flag

MISSING = object()


class Probed(Exception):
    """Raised where the probe has what it needs: the CLI with its parser, config, model and data built."""

    def __init__(self, cli: CLI) -> None:
        super().__init__("probed")
        self.cli = cli


class Probe(CLI):
    """The CLI of ``fit`` up to its Trainer: nothing is written, no run folder made."""

    def before_instantiate_classes(self) -> None:
        self.saved_card = {}  # no checkpoint to read the classes from
        # The model and data are what is checked; a logger would write its files (W&B's id) here.
        trainer = self.config[self.subcommand].trainer
        trainer.logger, trainer.callbacks, trainer.plugins = None, None, None

    def instantiate_trainer(self, **kwargs: Any) -> None:
        raise Probed(self)


@dataclass
class Base:
    """fit's config as given (the study's starting point), and what its model logs."""

    cli: CLI
    args: list[str]

    @property
    def root(self) -> Path:
        return Path(self.given.trainer.default_root_dir or "runs")

    @property
    def monitor(self) -> str:
        monitor = self.given.get("checkpoint.monitor")
        if not monitor:
            raise UsageError(
                "tune needs a metric: a --tune.space with `metric:`, or --checkpoint.monitor KEY"
            )
        return monitor

    @property
    def mode(self) -> str:
        return "minimize" if self.given.get("checkpoint.mode") == "min" else "maximize"

    @property
    def seed(self) -> int:
        seed = self.given.get("seed_everything")
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0

    def check(self, space: Space) -> None:
        """One ``error:`` line for the first key, value or metric fit would refuse."""
        monitorable = getattr(self.cli.model, "monitorable", None)
        if monitorable is not None and space.metric not in monitorable:
            raise UsageError(
                f"the metric {space.metric} is never logged; the model logs {', '.join(monitorable)}"
            )
        keys = list(flatten(self.given))
        for key, values in corners(space).items():
            if lookup(self.given, key) is MISSING:
                close = difflib.get_close_matches(key, keys, n=1)
                hint = f"; close: {close[0]}" if close else " (python -m app fit --help)"
                raise UsageError(f"--tune.space: {key} is no option of fit{hint}")
            for value in values:
                try:
                    self.cli.parse_arguments(self.cli.parser, ["fit", *self.args, flag(key, value)])
                except UsageError as err:
                    raise UsageError(f"--tune.space parameter {key}={value!r}: {err}") from None
        self.cli.parse_arguments(self.cli.parser, ["fit", *self.args])

    @property
    def given(self) -> Namespace:
        return self.cli.config["fit"]

    def baseline(self, space: Space) -> tuple[dict[str, Any], str | None]:
        """The config's own values of the searched keys, and the first that is outside the space."""
        values = {}
        for key, distribution in space.distributions_for_ask().items():
            value = plain(lookup(self.given, key))
            if not contains(distribution, value):
                return {}, f"{key}={value!r}"
            values[key] = value
        return values, None


def probe(args: list[str], folds: int) -> Base:
    """fit's config for ``args`` (fold 0 of ``folds``), model and data built; an error line if fit refuses."""
    extra = [f"--data.folds={folds}", "--data.fold=0"] if folds > 1 else []
    try:
        build(Probe, ["fit", *args, *extra])
    except Probed as probed:
        return Base(probed.cli, args)
    raise AssertionError("the probe's CLI ran past its Trainer")


def corners(space: Space) -> dict[str, list[Any]]:
    """The values of each key that fit must take: both ends of a range, every listed value, a fixed one."""
    found: dict[str, list[Any]] = {key: [value] for key, value in space.fixed.items()}
    for key, d in space.distributions.items():
        found[key] = list(d.choices) if isinstance(d, CategoricalDistribution) else [d.low, d.high]
    return found


def lookup(config: Namespace, key: str) -> Any:
    """``config``'s value at a W&B key such as ``model.optimizer.lr`` (through init_args), else MISSING."""
    node: Any = config
    for part in key.split("."):
        if isinstance(node, Namespace) and part in node:
            node = node[part]
        elif (
            isinstance(node, Namespace)
            and isinstance(node.get("init_args"), Namespace)
            and part in node.init_args
        ):
            node = node.init_args[part]
        else:
            return MISSING
    return node


def plain(value: Any) -> Any:
    """``value`` as the plain value a sweep file holds (the parser's restricted types are subclasses)."""
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def contains(distribution: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` is one ``distribution`` can draw."""
    if isinstance(distribution, CategoricalDistribution):
        # 1 is no True, nor "1" a 1; an int may stand for a float (0 in [0.0, 0.1]).
        return any(
            value == choice
            and isinstance(value, bool) == isinstance(choice, bool)
            and isinstance(value, str) == isinstance(choice, str)
            for choice in distribution.choices
        )
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return distribution.low <= value <= distribution.high
