"""Gradient accumulation proven by equivalence: 2 gloo processes at batch B accumulating 2 batches a step
take the steps of 1 process at 4B, the lr scaled by the global batch (4 x one device's)."""

import pytest
from helpers.cli import check, load_probe, max_difference, probe, run_app, run_process

pytestmark = pytest.mark.distributed
# As in test_distributed.py: float32 sums in another order leave the weights ~1e-8 apart after these
# steps, while an lr scaled by the world size alone (x2, not x4) moves them ~1e-3.
SGD_TOLERANCE = 1e-5


@pytest.mark.full
def test_two_processes_at_b_accumulating_2_match_one_at_4b(mnist_root, tmp_path):
    """512 training images: 2 optimizer steps of 256 either way, lr 0.01 x 4 = 0.04."""
    common = [f"--data.root={mnist_root}", "--test_after_fit=false", "--trainer.accelerator=cpu"]
    one = ["--trainer.devices=1", "--data.batch_size=256", "--trainer.limit_train_batches=2"]
    one.append("--model.optimizer.lr=0.04")
    result = run_app("fit", *common, *one, probe(tmp_path / "one"), cwd=tmp_path / "one")
    check(result)
    assert "global batch 256, lr 0.04;" in result.stderr
    two = ["--trainer.devices=2", "--trainer.strategy=ddp", "--data.batch_size=64"]
    two += [
        "--trainer.accumulate_grad_batches=2",
        "--trainer.limit_train_batches=4",
        "--model.optimizer.lr=0.01",
    ]
    result = run_process("fit", *common, *two, probe(tmp_path / "two"), cwd=tmp_path / "two")
    check(result)
    assert "global batch 256 (64 x 2 x 2 accumulated), lr 0.04;" in result.stderr
    single, ranks = (
        load_probe(tmp_path / "one", "end", 0),
        [load_probe(tmp_path / "two", "end", r) for r in (0, 1)],
    )
    assert ranks[0]["global_step"] == ranks[1]["global_step"] == single["global_step"] == 2
    assert max_difference(ranks[0]["weights"], ranks[1]["weights"]) == 0
    assert max_difference(ranks[0]["weights"], single["weights"]) < SGD_TOLERANCE
    start = load_probe(tmp_path / "one", "start", 0)["weights"]
    assert max_difference(single["weights"], start) > 1e-3  # it trained
