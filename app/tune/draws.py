"""Each trial's draws from a sampler seeded with the study's seed and the trial's number.

Every tune process builds its sampler from the same flags; one seeded stream per process would give each
process's k-th trial the same values as every other's. A trial's number is unique in the study, so a seed
made of it makes every worker's and every rerun's draws their own, and one worker's study reproducible.
"""

import copy
from collections.abc import Callable
from typing import Any

import numpy
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState


def trial_seed(seed: int, number: int) -> int:
    """The seed of trial ``number``'s draws in a study seeded with ``seed``."""
    return int(numpy.random.SeedSequence([seed, number]).generate_state(1)[0])


def reseeded(sampler: BaseSampler) -> Callable[[int], BaseSampler]:
    """A maker of copies of a sampler given whole (``--tune.sampler``): its seed cannot be set again
    through Optuna's API, so each copy draws from fresh entropy (distinct, not reproducible)."""

    def make(seed: int) -> BaseSampler:
        fresh = copy.deepcopy(sampler)
        fresh.reseed_rng()
        return fresh

    return make


class PerTrial(BaseSampler):
    """Draws each trial with a sampler made for it by ``make(seed)``, the seed from the trial's number.

    Args:
        make: builds a sampler from a seed (``lambda seed: optuna.samplers.TPESampler(seed=seed)``).
        seed: the study's seed (``--seed_everything``).
    """

    def __init__(self, make: Callable[[int], BaseSampler], seed: int) -> None:
        self.make, self.seed = make, seed
        self.inner = make(seed)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner = self.make(trial_seed(self.seed, trial.number))
        self.inner.before_trial(study, trial)

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.inner.sample_relative(study, trial, search_space)

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: list[float] | None,
    ) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()
