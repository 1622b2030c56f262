"""A shard chunk cut short (a copy that failed): one line naming the file, never a sample read wrong."""

import json
import shutil
from pathlib import Path

import pytest
from helpers.cli import run_app

from data import DataError, StreamingDataModule
from data.mnist import MNISTDataModule
from data.streaming.writer import shard


@pytest.fixture(scope="module")
def small_chunks(mnist_root, tmp_path_factory) -> Path:
    """The MNIST fixture's splits as shards of 9 samples a chunk (60 training chunks)."""
    output = tmp_path_factory.mktemp("small-chunks") / "s"
    shard(MNISTDataModule(root=str(mnist_root), val_size=100), str(output), workers=1, chunk_size=9)
    return output


def cut_short(shards: Path) -> str:
    """Cut one training chunk of ``shards`` to half; the line that names it."""
    chunk = json.loads((shards / "train" / "index.json").read_text())["chunks"][30]
    path = shards / "train" / chunk["filename"]
    whole = path.stat().st_size
    assert whole == chunk["chunk_bytes"]
    with open(path, "r+b") as f:
        f.truncate(whole // 2)
    return (
        f"{path} is cut short ({whole // 2:,} of its {whole:,} bytes): copy it again whole from where the "
        "shards were written, or write them again with python -m app shard"
    )


def test_a_chunk_cut_short_is_named_before_the_first_step(small_chunks, tmp_path):
    shards = shutil.copytree(small_chunks, tmp_path / "shards")
    why = cut_short(shards)
    args = ["--data=StreamingDataModule", f"--data.root={shards}", "--test_after_fit=false"]
    result = run_app("fit", *args, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == f"error: {why}"
    assert not list(tmp_path.glob("runs/*/*"))  # nothing of the run kept


def test_a_chunk_cut_short_mid_epoch_is_named_when_met(small_chunks, tmp_path):
    """Whole when the epoch starts, cut short before its turn: reading it fails with the same line, not
    LitData's wait for a download that hung."""
    shards = shutil.copytree(small_chunks, tmp_path / "shards")
    dataset = StreamingDataModule(root=str(shards)).dataset("train", train=True)
    why = cut_short(shards)
    with pytest.raises(DataError) as raised:
        for _ in dataset:
            pass
    assert str(raised.value) == why
