"""``python -m app tune``'s flags read in this process, fit's as ``python -m app fit`` reads them and tune's
own (``--tune.*``) in the same parse, before any trial runs: every key of the space an option of fit, each
end of its range a value fit takes, the metric one the model logs."""

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonargparse import Namespace
from optuna.distributions import BaseDistribution, CategoricalDistribution

from app.cli import CLI, build, check_logged
from app.errors import UsageError
from app.tune.identity import flatten
from app.tune.options import Options
from app.tune.space import Space
from app.tune.trial import flag

USAGE = "python -m app tune [-h] [--tune.OPTION VALUE ...] [fit's options]"


class Probed(Exception):
    """Raised where the probe has what it needs: the CLI with its parser, config, model and data built."""

    def __init__(self, cli: CLI) -> None:
        super().__init__("probed")
        self.cli = cli


class Probe(CLI):
    """The CLI of ``fit`` with tune's options (the group ``tune``), up to its Trainer: nothing is written,
    no run folder made."""

    def __init__(self, *args: Any, parser_kwargs: dict[str, Any], **kwargs: Any) -> None:
        # Its help is tune's: fit's options and the tune group.
        fit = {**parser_kwargs["fit"], "description": Options.__doc__.partition("\n")[0], "usage": USAGE}
        super().__init__(*args, parser_kwargs={**parser_kwargs, "fit": fit}, **kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        super().add_arguments_to_parser(parser)
        parser.add_class_arguments(Options, "tune")

    def parse_arguments(self, parser, args: list[str]) -> None:
        super().parse_arguments(parser, args)
        config = self.config.fit
        if config.tune.space is None and config.tune.folds == 1 and config.tune.seeds == 1:
            raise UsageError(
                "tune needs --tune.space FILE (a search), --tune.folds K (a cross-validation) or "
                "--tune.seeds N (repeats over seeds)"
            )
        for path in config.get("config") or []:
            if path is not None and "tune" in (yaml.safe_load(path.read_text()) or {}):
                raise UsageError(
                    f"--config {path}: tune's options are --tune.* flags only (each trial's fit reads this "
                    "file, and has none): move its tune: section to flags"
                )
        if config.tune.folds > 1:  # fold 0 of K, as each trial's first fit is (data checks the two)
            super().parse_arguments(parser, [*args, f"--data.folds={config.tune.folds}", "--data.fold=0"])

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand]
        self.saved_card = {}  # no checkpoint to read the classes from
        # The model and data are what is checked; a logger would write its files (W&B's id) here.
        config.trainer.logger, config.trainer.callbacks, config.trainer.plugins = None, None, None

    def instantiate_trainer(self, **kwargs: Any) -> None:
        raise Probed(self)


@dataclass
class Base:
    """The config as given (the study's starting point): tune's options, fit's config and what its model
    logs."""

    cli: CLI
    args: list[str]

    @property
    def options(self) -> Options:
        return self.cli.config_init.fit.tune

    @property
    def given(self) -> Namespace:
        """fit's config as given: tune's options left out."""
        given = self.cli.config.fit.clone()
        given.pop("tune")
        return given

    @property
    def fit_args(self) -> list[str]:
        """The flags each trial's fit gets: ``args`` less tune's (``--tune``, ``--tune.*``, their values)."""
        tune = [arg == "--tune" or arg.startswith(("--tune.", "--tune=")) for arg in self.args]
        return [
            arg
            for i, arg in enumerate(self.args)
            if not tune[i]
            and not (i and tune[i - 1] and "=" not in self.args[i - 1] and not arg.startswith("--"))
        ]

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
        check_logged(self.cli.model, space.metric, "the metric")
        flat = flatten(self.given)
        for key, values in corners(space).items():
            if key.replace(".init_args.", ".") not in flat:
                close = difflib.get_close_matches(key, list(flat), n=1)
                hint = f"; close: {close[0]}" if close else " (python -m app fit --help)"
                raise UsageError(f"--tune.space: {key} is no option of fit{hint}")
            for value in values:
                try:
                    self.cli.parse_arguments(self.cli.parser, ["fit", *self.args, flag(key, value)])
                except UsageError as err:
                    raise UsageError(f"--tune.space parameter {key}={value!r}: {err}") from None
        self.cli.parse_arguments(self.cli.parser, ["fit", *self.args])

    def baseline(self, space: Space) -> tuple[dict[str, Any], str | None]:
        """The config's own values of the searched keys, and the first that is outside the space."""
        values, given = {}, self.given
        flat = flatten(given)
        for key, distribution in space.distributions_for_ask().items():
            value = flat[key.replace(".init_args.", ".")]
            # A class is its path and its init_args: a path drawn alone would not carry the config's.
            if isinstance(given.get(key), Namespace) or not contains(distribution, value):
                return {}, f"{key}={value!r}"
            values[key] = value
        return values, None


def probe(args: list[str]) -> Base:
    """The config of ``python -m app tune ARGS`` (fold 0 of --tune.folds), model and data built; an error
    line if fit refuses."""
    try:
        build(Probe, ["fit", *args])
    except Probed as probed:
        return Base(probed.cli, args)
    raise AssertionError("the probe's CLI ran past its Trainer")


def corners(space: Space) -> dict[str, list[Any]]:
    """The values of each key that fit must take: both ends of a range, every listed value, a fixed one."""
    found: dict[str, list[Any]] = {key: [value] for key, value in space.fixed.items()}
    for key, d in space.distributions.items():
        found[key] = list(d.choices) if isinstance(d, CategoricalDistribution) else [d.low, d.high]
    return found


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
