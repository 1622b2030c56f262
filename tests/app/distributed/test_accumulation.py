"""Gradient accumulation and the balanced sampler proven by equivalence: 2 gloo processes at batch B
accumulating 2 batches a step take the steps of 1 process at 4B, the lr scaled by the global batch (4 x one
device's), drawing the same samples: the balanced sampler's draw of an epoch depends on the seed and the
epoch, not on the ranks."""

import pytest
from helpers.cli import check, load_probe, max_difference, probe, run_app, run_folder, run_process

pytestmark = pytest.mark.distributed
# As in test_distributed.py: float32 sums in another order leave the weights ~1e-8 apart after these
# steps, while an lr scaled by the world size alone (x2, not x4) moves them ~1e-3.
SGD_TOLERANCE = 1e-5


@pytest.mark.full
def test_two_processes_at_b_accumulating_2_match_one_at_4b_with_balanced_sampling(
    imbalanced_mnist_root, tmp_path
):
    """440 training images, classes 5-9 ten times as many as 0-4, drawn balanced: 2 optimizer steps of 128
    either way, lr 0.005 x 4 = 0.02."""
    common = [f"--data.root={imbalanced_mnist_root}", "--data.sampler=balanced", "--test_after_fit=false"]
    common.append("--trainer.accelerator=cpu")
    one = ["--trainer.devices=1", "--data.batch_size=128", "--trainer.limit_train_batches=2"]
    one.append("--model.optimizer.lr=0.02")
    result = run_app("fit", *common, *one, probe(tmp_path / "one"), cwd=tmp_path / "one")
    check(result)
    assert "global batch 128, lr 0.02;" in result.stderr
    two = ["--trainer.devices=2", "--trainer.strategy=ddp", "--data.batch_size=32"]
    two += [
        "--trainer.accumulate_grad_batches=2",
        "--trainer.limit_train_batches=4",
        "--model.optimizer.lr=0.005",
    ]
    result = run_process("fit", *common, *two, probe(tmp_path / "two"), cwd=tmp_path / "two")
    check(result)
    assert "global batch 128 (32 x 2 x 2 accumulated), lr 0.02;" in result.stderr
    assert "sampler: balanced" in (run_folder(tmp_path / "two") / "config.yaml").read_text()
    single, ranks = (
        load_probe(tmp_path / "one", "end", 0),
        [load_probe(tmp_path / "two", "end", r) for r in (0, 1)],
    )
    assert ranks[0]["global_step"] == ranks[1]["global_step"] == single["global_step"] == 2
    assert max_difference(ranks[0]["weights"], ranks[1]["weights"]) == 0
    assert max_difference(ranks[0]["weights"], single["weights"]) < SGD_TOLERANCE
    start = load_probe(tmp_path / "one", "start", 0)["weights"]
    assert max_difference(single["weights"], start) > 1e-3  # it trained
