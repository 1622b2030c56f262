"""The study a tune process works on: the one of its settings (see identity.py), made by the first
process that asks, which queues the config's own values (or a grid's points) first."""

import sys
import time
from typing import TYPE_CHECKING

import optuna
from optuna.storages import BaseStorage

from app.errors import UsageError
from app.tune.draws import PerTrial, reseeded
from app.tune.identity import IDENTITY, differing, digest
from app.tune.study import open_storage, sqlite_elsewhere

if TYPE_CHECKING:
    from app.tune.search import Tune


def open_study(tune: "Tune") -> tuple[optuna.Study, BaseStorage]:
    """The study of ``tune``'s settings: the one named, else (the default name taken by other settings) one
    of a name derived from them."""
    study, storage, kept = study_of(tune)
    if kept is None or kept == tune.settings:
        return study, storage
    keys = differing(kept, tune.settings)
    shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
    shown += " differs" if len(keys) == 1 else " differ"
    where = tune.options.storage or tune.folder / "study.db"
    if tune.options.study_name:
        raise UsageError(
            f"the study {tune.name} in {where} tunes other settings ({shown}); give another "
            "--tune.study_name, or none for a study named after these settings"
        )
    derived = f"{tune.name}-{digest(tune.settings)}"
    print(
        f"tune: the study {tune.name} tunes other settings ({shown}): this is study {derived}",
        file=sys.stderr,
    )
    tune.name, tune.folder = derived, tune.base.root / "tune" / derived
    study, storage, kept = study_of(tune)
    if kept is not None and kept != tune.settings:
        raise UsageError(f"the study {tune.name} in {where} tunes other settings; give --tune.study_name")
    return study, storage


def study_of(tune: "Tune") -> tuple[optuna.Study, BaseStorage, dict | None]:
    """The study ``tune.name``, made by the first process that asks (which queues the config's own values
    first); the settings it was made with where it was there already."""
    if tune.options.storage is None:
        tune.folder.mkdir(parents=True, exist_ok=True)
    storage = open_storage(tune.options.storage, tune.folder)
    user = tune.options.sampler
    sampler = PerTrial(reseeded(user), tune.base.seed) if user else tune.space.sampler(tune.base.seed)
    pruner = tune.options.pruner or tune.space.pruner()
    try:
        study = optuna.create_study(
            storage=storage,
            study_name=tune.name,
            direction=tune.space.direction,
            sampler=sampler,
            pruner=pruner,
        )
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name=tune.name, storage=storage, sampler=sampler, pruner=pruner)
        for _ in range(50):  # the process that made it may be a moment from marking it
            if IDENTITY in study.user_attrs:
                break
            time.sleep(0.1)
        kept = study.user_attrs.get(IDENTITY, {})
        host = sqlite_elsewhere(storage, study) if kept == tune.settings else None
        if host:
            raise UsageError(
                f"the study {tune.name} is an SQLite file, which a tune process on {host} is using: "
                "SQLite serves one machine (its locks fail over network file systems); use "
                "--tune.storage PATH.log (a journal file) or postgresql://... for several"
            ) from None
        return study, storage, kept
    study.set_user_attr(IDENTITY, tune.settings)
    if tune.points is not None:
        for point in tune.points:
            study.enqueue_trial(point)
        return study, storage, None
    baseline, outside = tune.base.baseline(tune.space)
    if outside:
        print(f"tune: trial 0 is drawn: the config's {outside} is outside the space", file=sys.stderr)
    else:
        study.enqueue_trial(baseline, user_attrs={"baseline": True})
    return study, storage, None
