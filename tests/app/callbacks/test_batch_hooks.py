"""Lightning calls a callback's batch hooks only where the callback does something in them."""

import re
from collections import defaultdict

from helpers.cli import check, run_app, run_folder

from app.internals import BATCH_HOOKS, TRAIN_BATCH_HOOKS


def called_hooks(mnist_root, tmp_path, *args: str) -> dict[str, set[str]]:
    """The hooks of each callback that Lightning's simple profiler timed in a short fit."""
    args = (
        f"--data.root={mnist_root}",
        "--trainer.limit_train_batches=4",
        "--trainer.limit_val_batches=2",
        *args,
    )
    check(run_app("fit", *args, configs=("configs/debug/profile.yaml",), cwd=tmp_path))
    report = (run_folder(tmp_path) / "fit-profile.txt").read_text()
    # Lightning's simple profiler times each hook it calls: "[Callback]NAME{...}.HOOK",
    # "[LightningModule]NAME.HOOK".
    called = defaultdict(set)
    for name, hook in re.findall(r"\[(?:Callback|LightningModule)\](\w+)(?:\{[^}]*\})?\.(\w+)", report):
        called[name].add(hook)
    return called


def test_only_the_batch_hooks_a_callback_defines_are_called(mnist_root, tmp_path):
    called = called_hooks(mnist_root, tmp_path)
    batch = set(BATCH_HOOKS)
    assert called["StopOnNonFiniteLoss"] & batch == {"on_before_backward"}
    assert called["LastCheckpoint"] & batch == {"on_train_batch_end"}
    # It saves at validations only, unless told to save every N steps or minutes.
    assert not called["ModelCheckpoint"] & batch
    assert "on_validation_end" in called["ModelCheckpoint"]
    for name in ("EndRanksTogether", "PerClassTable", "PredictionsWriter", "RunConfig"):
        assert not called[name] & batch, name
        assert "on_train_start" in called[name]  # the other hooks are still called
    # The model's training ones: ImageClassifier defines on_before_optimizer_step (frozen layers) only.
    assert called["ImageClassifier"] & set(TRAIN_BATCH_HOOKS) == {"on_before_optimizer_step"}
    assert {"configure_optimizers", "on_train_epoch_end"} <= called["ImageClassifier"]


def test_a_checkpoint_every_n_steps_is_still_checked_at_each_batch(mnist_root, tmp_path):
    called = called_hooks(mnist_root, tmp_path, "--checkpoint.every_n_train_steps=2")
    assert called["ModelCheckpoint"] & set(BATCH_HOOKS) == {"on_train_batch_end"}
