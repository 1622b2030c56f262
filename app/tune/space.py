"""The search space: a W&B sweep file (``configs/sweeps/``) read as Optuna distributions, sampler and pruner.

One file drives ``wandb sweep`` and ``python -m app tune`` alike. What Optuna cannot draw (an unbounded
normal, a quantized log scale, weighted values, nested parameters) is refused, naming the key.
"""

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from app.errors import UsageError
from app.tune.draws import PerTrial

SUPPORTED = (
    "values, value, constant, categorical, int_uniform, uniform, q_uniform, log_uniform_values, "
    "log_uniform (min and max as exponents)"
)
CHOICE = (type(None), bool, int, float, str)


@dataclass
class Space:
    """A search space and how to search it.

    Attributes:
        distributions: each CLI key (``model.optimizer.lr``) and what it is drawn from.
        fixed: keys with one value (W&B's ``value``/``constant``), passed to every trial.
        metric: the logged key whose value a trial is judged by.
        direction: ``maximize`` or ``minimize``.
        method: ``random``, ``grid`` or ``bayes``.
        min_iter: W&B's hyperband ``min_iter``: validations before a trial may be stopped; None: no pruning.
        eta: hyperband's reduction factor.
    """

    distributions: dict[str, BaseDistribution]
    fixed: dict[str, Any]
    metric: str
    direction: str
    method: str = "random"
    min_iter: int | None = None
    eta: int = 3

    def digest(self) -> str:
        """A hash of what is searched, kept in the study: a study name met with another space is refused."""
        text = json.dumps(
            {
                "distributions": {
                    k: optuna.distributions.distribution_to_json(d) for k, d in self.distributions.items()
                },
                "fixed": self.fixed,
                "metric": self.metric,
                "direction": self.direction,
            },
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        """The sampler W&B's ``method`` names, each trial's draws seeded from ``seed`` and its number (a
        grid's points are queued instead: :meth:`points`)."""
        self.points()  # a grid of ranges is refused now
        if self.method == "bayes":
            return PerTrial(lambda s: optuna.samplers.TPESampler(seed=s), seed)
        return PerTrial(lambda s: optuna.samplers.RandomSampler(seed=s), seed)

    def grid(self) -> dict[str, CategoricalDistribution]:
        """The space as a grid: every key a list of values (an int range counts as its values)."""
        grid = {}
        for key, d in self.distributions.items():
            if isinstance(d, CategoricalDistribution):
                grid[key] = d
            elif isinstance(d, IntDistribution) and not d.log:
                grid[key] = CategoricalDistribution(list(range(d.low, d.high + 1, d.step)))
            else:
                raise UsageError(
                    f"method grid needs listed values: {key} is drawn from a range; give it values"
                )
        return grid

    def points(self) -> list[dict[str, Any]] | None:
        """Every point of a grid, each queued as a trial when the study is made (Optuna's GridSampler
        stops a study only inside ``optimize``, and ``tune`` asks and tells); None for other methods."""
        if self.method != "grid":
            return None
        grid = self.grid()
        return [
            dict(zip(grid, values, strict=True))
            for values in itertools.product(*(d.choices for d in grid.values()))
        ]

    def pruner(self) -> optuna.pruners.BasePruner:
        """W&B's ``early_terminate: hyperband`` as successive halving (its brackets at min_iter x eta^k)."""
        if self.min_iter is None:
            return optuna.pruners.NopPruner()
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=self.min_iter, reduction_factor=self.eta)

    def distributions_for_ask(self) -> dict[str, BaseDistribution]:
        """What each trial draws: the grid's lists where the method is grid."""
        return dict(self.grid()) if self.method == "grid" else dict(self.distributions)


def load(path: Path, metric: str, direction: str) -> Space:
    """Read the sweep file ``path``; ``metric``/``direction`` apply where it names no metric."""
    try:
        sweep = yaml.safe_load(path.read_text())
    except OSError as err:
        raise UsageError(f"--tune.space {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise UsageError(f"--tune.space {path} is not readable YAML: {' '.join(str(err).split())}") from None
    if (
        not isinstance(sweep, dict)
        or not isinstance(sweep.get("parameters"), dict)
        or not sweep["parameters"]
    ):
        raise UsageError(f"--tune.space {path} has no `parameters:` (a W&B sweep file: configs/sweeps/)")
    if "metric" in sweep:  # W&B's: a name, and a goal that is minimize unless given
        given = sweep["metric"]
        if not isinstance(given, dict) or not isinstance(given.get("name"), str):
            raise UsageError(
                f"--tune.space {path}: metric must be a mapping with a name, such as "
                f"{{name: val/acc, goal: maximize}}; got {given!r}"
            )
        metric, goal = given["name"], given.get("goal", "minimize")
    else:
        goal = direction
    if goal not in ("maximize", "minimize"):
        raise UsageError(f"--tune.space {path}: metric goal {goal!r} is not maximize or minimize")
    method = sweep.get("method", "random")
    if method not in ("random", "grid", "bayes"):
        raise UsageError(f"--tune.space {path}: method {method!r} is not random, grid or bayes")
    distributions, fixed = {}, {}
    for key, spec in sweep["parameters"].items():
        drawn = distribution(key, spec)
        if isinstance(drawn, BaseDistribution):
            distributions[key] = drawn
        else:
            fixed[key] = drawn
    min_iter, eta = hyperband(path, sweep.get("early_terminate"))
    return Space(distributions, fixed, metric, goal, method, min_iter, eta)


def hyperband(path: Path, stop: Any) -> tuple[int | None, int]:
    """W&B's ``early_terminate`` as ``min_iter`` (None: no pruning) and ``eta``."""
    if not stop:
        return None, 3
    if not isinstance(stop, dict) or stop.get("type") != "hyperband":
        raise UsageError(
            f"--tune.space {path}: early_terminate must be {{type: hyperband, min_iter: N}} "
            f"(or max_iter, eta, s); got {stop!r}"
        )
    numbers = {key: stop[key] for key in ("eta", "min_iter", "max_iter", "s") if key in stop}
    bad = [key for key, value in numbers.items() if isinstance(value, bool) or not isinstance(value, int)]
    bad += [key for key, value in numbers.items() if key not in bad and value < (2 if key == "eta" else 1)]
    if bad:
        raise UsageError(
            f"--tune.space {path}: early_terminate {bad[0]} must be a whole number of at least "
            f"{2 if bad[0] == 'eta' else 1}; got {stop[bad[0]]!r}"
        )
    eta = numbers.get("eta", 3)
    if "min_iter" in numbers:
        return numbers["min_iter"], eta
    if "max_iter" in numbers:  # W&B: the brackets count down from max_iter by eta, s times
        return max(1, numbers["max_iter"] // eta ** numbers.get("s", 3)), eta
    raise UsageError(f"--tune.space {path}: early_terminate hyperband needs min_iter or max_iter")


def distribution(key: str, spec: Any) -> BaseDistribution | Any:
    """The Optuna distribution of one W&B parameter, or its one value where it is fixed."""
    if not isinstance(spec, dict):
        raise UsageError(f"parameter {key}: expected a mapping such as {{values: [...]}}, got {spec!r}")
    if "parameters" in spec:
        raise UsageError(
            f"parameter {key}: nested parameters are not supported; name each key in full (a.b.c)"
        )
    if "probabilities" in spec:
        raise UsageError(
            f"parameter {key}: weighted values (probabilities) are not supported by Optuna's samplers"
        )
    kind = spec.get("distribution")
    if kind is None:
        if "values" in spec:
            kind = "categorical"
        elif "value" in spec:
            kind = "constant"
        elif {"min", "max"} <= spec.keys():
            ints = all(isinstance(spec[k], int) and not isinstance(spec[k], bool) for k in ("min", "max"))
            kind = "int_uniform" if ints else "uniform"
    if kind == "constant":
        return spec["value"]
    if kind == "categorical":
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            raise UsageError(f"parameter {key}: values must be a non-empty list")
        bad = [v for v in values if not isinstance(v, CHOICE)]
        if bad:
            raise UsageError(f"parameter {key}: value {bad[0]!r} is not a number, string, bool or null")
        return values[0] if len(values) == 1 else CategoricalDistribution(values)
    if kind not in ("int_uniform", "uniform", "q_uniform", "log_uniform_values", "log_uniform"):
        raise UsageError(
            f"parameter {key}: distribution {kind} cannot be drawn by Optuna; supported: {SUPPORTED}"
        )
    if not {"min", "max"} <= spec.keys():
        raise UsageError(f"parameter {key}: distribution {kind} needs min and max")
    low, high = spec["min"], spec["max"]
    if kind == "log_uniform":  # W&B: min and max are natural-log exponents
        low, high = math.exp(low), math.exp(high)
    try:
        if kind == "int_uniform":
            return IntDistribution(int(low), int(high), step=int(spec.get("q", 1)))
        if kind == "q_uniform":
            return FloatDistribution(float(low), float(high), step=float(spec.get("q", 1.0)))
        return FloatDistribution(float(low), float(high), log=kind != "uniform")
    except ValueError as err:
        raise UsageError(f"parameter {key}: {' '.join(str(err).split())}") from None
