"""What a study tunes: its search space, metric, folds, seeds and every resolved fit setting, kept in
the study.

A rerun with other settings is another study: under a name derived from its own settings where the
name was the default one, refused (naming the keys that differ) where ``--tune.study_name`` gave it.
"""

import hashlib
import json
from typing import Any

from jsonargparse import Namespace

IDENTITY = "identity"  # the study's user attribute: the flat settings below
# Where runs go and how they show, where this machine keeps the data and how many processes load it:
# no trial's result depends on these (tune sets the run's own), and machines sharing a study may differ.
UNTUNED = (
    "config",
    "data.root",
    "data.num_workers",
    "name",
    "ckpt_path",
    "test_after_fit",
    "trainer.default_root_dir",
    "trainer.logger",
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
    "data.folds",
    "data.fold",
)


def flatten(config: Namespace | dict, prefix: str = "") -> dict[str, Any]:
    """``config``'s values by W&B key (``model.optimizer.lr``: ``init_args`` left out, a class's path under
    the key of its object), as JSON values."""
    found: dict[str, Any] = {}
    for key, value in (config.as_dict() if isinstance(config, Namespace) else config).items():
        if key.startswith("__"):
            continue
        name = prefix if key == "init_args" else f"{prefix}{'.' if prefix else ''}{key}"
        if key == "class_path":
            found[prefix] = value
        elif isinstance(value, dict) and value:
            found.update(flatten(value, name))
        else:
            found[name] = json.loads(json.dumps(value, default=str))
    return found


def identity(
    config: Namespace, searched: list[str], space: str, folds: int, seeds: int = 1
) -> dict[str, Any]:
    """The settings a study is made of: fit's resolved ``config`` but the ``searched`` keys and
    :data:`UNTUNED`, with the space's hash, the folds and the seeds (only where more than one: a study
    of one seed keeps the settings it was made with)."""
    settings = {
        key: value
        for key, value in flatten(config).items()
        if key not in searched and not any(key == u or key.startswith(u + ".") for u in UNTUNED)
    }
    repeats = {"tune.seeds": seeds} if seeds > 1 else {}
    return {"tune.space": space, "tune.folds": folds, **repeats, **settings}


def digest(settings: dict[str, Any]) -> str:
    """A short hash of ``settings``: the suffix of a derived study name."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]


def differing(kept: dict[str, Any], given: dict[str, Any]) -> list[str]:
    """The keys whose values differ between a study's ``kept`` settings and the ``given`` ones."""
    return sorted(key for key in kept.keys() | given.keys() if kept.get(key, ...) != given.get(key, ...))
