"""The benchmark's own parts: the timer it adds to template runs, and how figures are derived."""

import json

import pytest
from helpers.cli import check, logged, run_app, run_folder
from helpers.page_faults import STEPS, run_python

from benchmarks.__main__ import median_run, throughput, timed


def test_the_timer_counts_training_steps_and_the_whole_fit(mnist_root, tmp_path):
    args = [f"--data.root={mnist_root}", "--trainer.max_epochs=2", timed(tmp_path, "a")]
    check(run_app("fit", *args, cwd=tmp_path))
    record = json.loads((tmp_path / "a.json").read_text())
    assert record["train_samples"] == [4 * 128, 4 * 128]  # 512 training images, 4 batches per epoch
    assert 0 < sum(record["train_seconds"]) < record["fit_seconds"]  # the fit also validates
    assert record["test_acc"] == pytest.approx(logged(run_folder(tmp_path))["test/acc"][-1])


def test_throughput_leaves_out_the_first_epoch():
    figures = throughput({"train_seconds": [9.0, 2.0, 3.0], "train_samples": [100, 100, 50]})
    assert figures["img_per_s"] == pytest.approx(150 / 5)
    assert figures["s_per_epoch"] == pytest.approx(2.5)
    assert throughput({"train_seconds": [4.0], "train_samples": [100]})["img_per_s"] == 25


def test_the_median_run_is_a_real_run():
    runs = [{"img_per_s": v, "round": i} for i, v in enumerate([300.0, 100.0, 200.0, 400.0])]
    assert median_run(runs)["round"] == 2  # lower middle of 100, 200, 300, 400
    assert median_run(runs[:3])["round"] == 2


def test_the_hand_written_loops_run_with_the_allocator_setting_of_the_template():
    """A limit measured under other process settings than the template would flatter or wrong it."""
    plain = int(run_python(STEPS))
    loops = int(run_python("from benchmarks.common import arguments; arguments('loop')\n" + STEPS))
    template = int(run_python("from app.process import prepare; prepare()\n" + STEPS))
    assert loops < plain / 5 and template < plain / 5
