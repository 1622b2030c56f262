"""The private name of Lightning the lr finder reaches (``app/lr_find/internals.py``) still works."""

import pytest
from lightning import Trainer

from app.lr_find.internals import spawns_ranks


@pytest.mark.parametrize(
    ("strategy", "spawns"), [("ddp_spawn", True), ("ddp_fork", True), ("ddp", False), ("auto", False)]
)
def test_spawned_ranks_are_told_from_a_launcher_that_is_rank_zero(strategy, spawns):
    trainer = Trainer(
        accelerator="cpu", devices=2 if strategy != "auto" else 1, strategy=strategy, logger=False
    )
    assert spawns_ranks(trainer) is spawns
