"""A run stopped mid-epoch and resumed with --ckpt_path last takes each remaining sample of the epoch once."""

import signal

import pytest
import torch
from helpers.cli import callback, check, load_probe, max_difference, probe, run_app, run_folder, run_process
from helpers.streaming_record import recorded

# 540 training samples at batch 27: 20 steps an epoch, 40 in all; SIGTERM after step 25 (epoch 2).
ARGS = [
    "--data=helpers.streaming_record.RecordingStreamingDataModule",
    "--data.batch_size=27",
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=1.0",
    "--test_after_fit=false",
    "--trainer.enable_progress_bar=false",
    "--trainer.logger=AppendingCSVLogger",
]


def fit(tmp, shards, workers, *args):
    return run_app(
        "fit", *ARGS, f"--data.root={shards}", f"--data.num_workers={workers}", *args, cwd=tmp, shrink=False
    )


def by_epoch(records: list[dict], epoch: int) -> list[int]:
    return [i for r in records if r["epoch"] == epoch for i in r["indices"]]


# Workers 0 is the simpler case of 2 (the SIGKILL test also runs 2 workers): left to `pytest -m slow`.
@pytest.mark.parametrize("workers", [pytest.param(0, marks=pytest.mark.slow), 2])
def test_mid_epoch_resume_takes_each_remaining_sample_once(workers, mnist_shards, tmp_path, monkeypatch):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    monkeypatch.setenv("STREAMING_RECORD", str(whole / "record"))
    check(fit(whole, mnist_shards, workers, probe(whole / "probe")))
    monkeypatch.setenv("STREAMING_RECORD", str(cut / "record"))
    stopped = fit(cut, mnist_shards, workers, callback("helpers.stops.SigtermAt", step=25))
    assert stopped.returncode == 143, stopped.stderr[-2000:]
    last = run_folder(cut) / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 25
    before = recorded(cut / "record")
    monkeypatch.setenv("STREAMING_RECORD", str(cut / "record-resumed"))
    check(fit(cut, mnist_shards, workers, "--ckpt_path=last", probe(cut / "probe")))
    after = recorded(cut / "record-resumed")

    uninterrupted = recorded(whole / "record")
    assert len(uninterrupted) == 40
    for epoch in (0, 1):
        assert sorted(by_epoch(uninterrupted, epoch)) == list(range(540))
    # Before the stop: 25 batches (the 26th, fetched ahead, was not trained on). After: the other 15.
    trained_before = [r for r in before if r["step"] < 25]
    assert len(trained_before) == 25 and len(after) == 15
    second_epoch = by_epoch(trained_before, 1) + by_epoch(after, 1)
    assert sorted(second_epoch) == list(range(540)), "a sample lost or taken twice"
    # The same order as the uninterrupted run's: the same batches, so the same weights.
    assert second_epoch == by_epoch(uninterrupted, 1)
    end, reference = load_probe(cut / "probe", "end", 0), load_probe(whole / "probe", "end", 0)
    assert end["global_step"] == reference["global_step"] == 40
    assert max_difference(end["weights"], reference["weights"]) == 0


@pytest.mark.full
@pytest.mark.distributed  # a process of its own, killed
def test_resume_after_sigkill_from_the_last_checkpoint(mnist_shards, tmp_path, monkeypatch):
    """SIGKILL after step 27, last.ckpt from step 25: the resumed run retrains steps 25 and 26 (what the
    kill lost) and takes the rest of the epoch once, in the uninterrupted order, to its weights."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    every = ["--last_checkpoint.every_n_steps=5"]
    monkeypatch.setenv("STREAMING_RECORD", str(whole / "record"))
    check(fit(whole, mnist_shards, 2, *every, probe(whole / "probe")))
    monkeypatch.setenv("STREAMING_RECORD", str(cut / "record"))
    args = [*ARGS, f"--data.root={mnist_shards}", "--data.num_workers=2", *every]
    killed = run_process(
        "fit", *args, callback("helpers.stops.KillAt", step=27, rank=0), cwd=cut, shrink=False
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert torch.load(run_folder(cut) / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 25
    before = [r for r in recorded(cut / "record") if r["step"] < 25]
    monkeypatch.setenv("STREAMING_RECORD", str(cut / "record-resumed"))
    check(fit(cut, mnist_shards, 2, *every, "--ckpt_path=last", probe(cut / "probe")))
    after = recorded(cut / "record-resumed")
    assert len(before) == 25 and len(after) == 15
    second_epoch = by_epoch(before, 1) + by_epoch(after, 1)
    assert second_epoch == by_epoch(recorded(whole / "record"), 1)
    assert sorted(second_epoch) == list(range(540))
    end, reference = load_probe(cut / "probe", "end", 0), load_probe(whole / "probe", "end", 0)
    assert max_difference(end["weights"], reference["weights"]) == 0
