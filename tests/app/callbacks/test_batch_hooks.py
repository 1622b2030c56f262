"""Lightning calls a callback's batch hooks only where the callback does something in them."""

import re
from collections import defaultdict

from helpers.cli import check, run_app, run_folder

from app.internals import BATCH_HOOKS


def test_only_the_batch_hooks_a_callback_defines_are_called(mnist_root, tmp_path):
    args = [f"--data.root={mnist_root}", "--trainer.limit_train_batches=4", "--trainer.limit_val_batches=2"]
    check(run_app("fit", *args, configs=("configs/debug/profile.yaml",), cwd=tmp_path))
    report = (run_folder(tmp_path) / "fit-profile.txt").read_text()
    # Lightning's simple profiler times each callback hook it calls: "[Callback]NAME{...}.HOOK".
    called = defaultdict(set)
    for name, hook in re.findall(r"\[Callback\](\w+)(?:\{[^}]*\})?\.(on_\w+)", report):
        called[name].add(hook)
    batch = set(BATCH_HOOKS)
    assert called["StopOnNonFiniteLoss"] & batch == {"on_before_backward"}
    assert called["LastCheckpoint"] & batch == {"on_train_batch_end"}
    assert called["ModelCheckpoint"] & batch == {"on_train_batch_end"}
    for name in ("EndRanksTogether", "PerClassTable", "PredictionsWriter", "RunConfig"):
        assert not called[name] & batch, name
        assert "on_train_start" in called[name]  # the other hooks are still called
