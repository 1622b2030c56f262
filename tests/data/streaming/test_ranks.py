"""Per-epoch samples over 2 real gloo ranks: none twice, equal steps on every rank, the leftover as said."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import app_env, free_port

from data.mnist import MNISTDataModule
from data.streaming.writer import shard

pytestmark = pytest.mark.distributed
HERE = Path(__file__).parent


def run_ranks(root: Path, out: Path, batch: int, workers: int = 1, epochs: int = 2) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        f"--master_port={free_port()}",
    ]
    command += [str(HERE / "ranks.py"), str(root), str(out), str(batch), str(workers), str(epochs)]
    done = subprocess.run(command, env=app_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def check_epochs(ranks: list[dict], n: int, batch: int, epochs: int = 2) -> None:
    """Every epoch: the same steps on both ranks, no sample twice, and all but LitData's drop_last
    leftover of fewer than 2 x batch samples; a different order each epoch."""
    per_rank = (n // batch) // 2  # batches per rank: drop_last, on under DDP
    orders = []
    for epoch in range(epochs):
        batches = [rank["epochs"][epoch] for rank in ranks]
        assert [len(b) for b in batches] == [per_rank, per_rank]
        assert all(len(b) == batch for rank in batches for b in rank)  # whole batches only
        seen = [i for rank in batches for b in rank for i in b]
        assert len(seen) == len(set(seen)) == 2 * per_rank * batch
        assert set(seen) <= set(range(n))
        orders.append(seen)
    assert orders[0] != orders[1]
    assert all(rank["length"] == per_rank for rank in ranks)


@pytest.mark.full
def test_two_ranks_see_each_sample_once_an_epoch(mnist_shards, tmp_path):
    # 540 samples at batch 27: 20 batches, 10 a rank, nothing left over: every sample exactly once.
    ranks = run_ranks(mnist_shards, tmp_path, batch=27)
    check_epochs(ranks, 540, 27)
    for epoch in range(2):
        assert sorted(i for rank in ranks for b in rank["epochs"][epoch] for i in b) == list(range(540))


@pytest.mark.full
def test_uneven_shards_take_equal_steps_on_both_ranks(mnist_root, tmp_path):
    # 3 chunks of at most 200 samples for 2 ranks, 523 samples at batch 16: the ranks split chunks
    # mid-way; 32 batches, 16 a rank; 11 samples left over each epoch, none twice.
    data = MNISTDataModule(str(mnist_root), val_size=117)
    shard(data, str(tmp_path / "s"), workers=1, chunk_size=200)
    chunks = json.loads((tmp_path / "s" / "train" / "index.json").read_text())["chunks"]
    assert [c["chunk_size"] for c in chunks] == [200, 200, 123]
    ranks = run_ranks(tmp_path / "s", tmp_path / "out", batch=16, workers=2)
    check_epochs(ranks, 523, 16)
