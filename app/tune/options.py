"""The flags of ``python -m app tune`` (``--tune.*``); every other flag is fit's."""

from dataclasses import dataclass

import optuna
from jsonargparse.typing import PositiveFloat, PositiveInt


@dataclass
class Options:
    """Search and cross-validate with Optuna; every other flag is fit's (python -m app fit --help).

    Args:
        space: a W&B sweep file (configs/sweeps/): its parameters, method, metric and early_terminate;
            none: the config as it is, one trial (a cross-validation with --tune.folds, repeats over
            seeds with --tune.seeds).
        trials: trials in the study, over all the tune processes that share it.
        study_name: the study, kept in ROOT/tune/NAME/; default: the space file's name, or cv-CONFIG
            (the last --config's name) for a cross-validation, seeds-CONFIG for repeats over seeds;
            NAME-HASH where that study tunes other fit settings.
        storage: where the study lives: none for ROOT/tune/NAME/study.db (SQLite, one machine); a
            journal file PATH.log on a file system all machines see; or postgresql://USER:PASS@HOST/DB.
        sampler: an Optuna sampler (class_path and init_args) in place of the space's method; a copy of
            it draws each trial, reseeded afresh.
        pruner: an Optuna pruner in place of the space's early_terminate.
        folds: K >= 2: each trial's value is the mean over K fits, validating on fold I of K of the
            training split (--data.folds K --data.fold I).
        seeds: N >= 2: each trial's value is the mean over N fits, fit S seeded --seed_everything
            SEED+S (SEED the config's; the split and the data order stay --data.seed's), with its
            standard deviation over the N seeds; in trials.csv, a column per seed. With --tune.folds K,
            N x K fits: a seed's value is its mean over the K folds.
        timeout: seconds after which no new trial starts (a running one finishes).
    """

    space: str | None = None
    trials: PositiveInt = 20
    study_name: str | None = None
    storage: str | None = None
    sampler: optuna.samplers.BaseSampler | None = None
    pruner: optuna.pruners.BasePruner | None = None
    folds: PositiveInt = 1
    seeds: PositiveInt = 1
    timeout: PositiveFloat | None = None
