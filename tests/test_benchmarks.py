"""The benchmark's own parts: the timer it adds to template runs, and how figures are derived."""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import pytest
import torch
import yaml
from helpers.cli import ROOT, check, logged, run_app, run_folder
from helpers.data_files import write_photo_folder
from helpers.page_faults import STEPS, run_python

from benchmarks.__main__ import median_run, throughput, timed
from benchmarks.common import count
from benchmarks.internals import compile_counters
from benchmarks.step_overhead import TURNS, Turns


def test_the_timer_counts_training_steps_and_the_whole_fit(mnist_root, tmp_path):
    args = [f"--data.root={mnist_root}", "--trainer.max_epochs=2", timed(tmp_path, "a")]
    check(run_app("fit", *args, cwd=tmp_path))
    record = json.loads((tmp_path / "a.json").read_text())
    assert record["train_samples"] == [4 * 128, 4 * 128]  # 512 training images, 4 batches per epoch
    assert 0 < sum(record["train_seconds"]) < record["fit_seconds"]  # the fit also validates
    assert record["test_acc"] == pytest.approx(logged(run_folder(tmp_path))["test/acc"][-1])


def test_the_pictures_benchmark_drops_only_validation_pictures(mnist_root, tmp_path):
    # benchmarks/pictures.py goes with the optional pictures part (README, "Make it yours").
    pictures = pytest.importorskip("benchmarks.pictures", reason="the pictures part was dropped")
    PICTURES, without_pictures = pictures.PICTURES, pictures.without_pictures
    check(
        run_app(
            "fit", f"--data.root={mnist_root}", "--test_after_fit=false", without_pictures(), cwd=tmp_path
        )
    )
    run = run_folder(tmp_path)
    config = yaml.safe_load((run / "config.yaml").read_text())
    defaults = yaml.safe_load((ROOT / "configs" / "defaults.yaml").read_text())
    paths = [c if isinstance(c, str) else c["class_path"] for c in defaults["trainer"]["callbacks"]]
    assert [c["class_path"] for c in config["trainer"]["callbacks"]] == [p for p in paths if p != PICTURES]
    assert not (run / "plots").exists()


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
    """A limit measured under other process settings than the template would flatter or wrong it (the
    template's own: tests/app/test_process.py)."""
    plain = int(run_python(STEPS))
    loops = int(run_python("from benchmarks.common import arguments; arguments('loop')\n" + STEPS))
    assert loops < plain / 5


def test_the_photo_pipelines_deliver_what_a_training_step_takes(tmp_path):
    photos = pytest.importorskip("benchmarks.photos", reason="the image-folder part was dropped")
    images_per_second, ours, reference = photos.images_per_second, photos.ours, photos.reference
    """a, b and c are compared on like batches: normalized float, (B, 3, size, size), on the device
    (b's uint8 batches once the DataModule's after-transfer hook has run, as Lightning runs it)."""
    root, cpu = write_photo_folder(tmp_path / "photos", per_class=8), torch.device("cpu")
    loaders = {"a": (reference(root, 32, 8, 0, cpu), lambda batch, _: batch)}
    loaders |= {
        name: ours(root, 32, 8, 0, loader, cpu)[:2] for name, loader in (("b", "torch"), ("c", "resident"))
    }
    for name, (loader, on_device) in loaders.items():
        images, labels = on_device(next(iter(loader)), 0)
        assert images.dtype == torch.float32 and images.shape == (8, 3, 32, 32) and len(labels) == 8, name
        # [0, 1] standardized with ImageNet's statistics; 8 photos of 3 tinted classes span most of it
        assert -2.2 < images.min() < -0.5 and 0.5 < images.max() < 2.7, name
    loader, on_device = loaders["b"]
    assert images_per_second(loader, 1, cpu, on_device=on_device) > 0
    assert images_per_second(loaders["c"][0], 2, cpu, photos.resnet18_step(cpu)) > 0


def test_a_row_reports_each_turn_and_its_waits_are_not_timed(monkeypatch):
    """benchmarks.step_overhead's rows take turns: at each turn's end a row reports its µs per step and
    waits for the next."""
    (go_read, go), (told, tell) = os.pipe(), os.pipe()
    monkeypatch.setenv(TURNS, f"2,3,{go_read},{tell}")  # 2 untimed steps, turns of 3 steps
    turns = Turns()
    os.write(go, b"1")
    late = threading.Timer(0.3, os.write, (go, b"11"))  # the later turns come 0.3 s late
    late.start()
    for step in range(2 + 3 * 2 + 1):
        turns.at(step)
        time.sleep(0.01)  # the step
    late.join()
    turns.tell.close()
    with os.fdopen(told) as lines:
        assert next(lines) == "ready\n"
        per_step = [float(line) for line in lines]
    assert len(per_step) == 2
    # At least the steps' 10 ms each; counting the 0.3 s wait would add 100,000 µs per step.
    assert all(10_000 <= value < 60_000 for value in per_step)


def test_a_count_of_rounds_below_one_is_refused_by_the_parser(capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=count)
    assert parser.parse_args(["--rounds", "2"]).rounds == 2
    for given in ("0", "-1", "x"):
        with pytest.raises(SystemExit) as ended:
            parser.parse_args(["--rounds", given])
        assert ended.value.code == 2
        assert ("give 1 or more" in capsys.readouterr().err) == (given != "x")


def test_the_compile_counters_count_a_recompilation():
    """A compiled function called with a second shape (static shapes) compiles again: one more frame."""
    before = compile_counters()
    double = torch.compile(lambda x: 2 * x, backend="eager", dynamic=False)
    double(torch.ones(2))
    double(torch.ones(3))
    after = compile_counters()
    assert after["frames compiled"] - before["frames compiled"] == 2
    for unchanged in ("graph breaks", "cudagraph skips"):
        assert after[unchanged] == before[unchanged], unchanged


@pytest.mark.full
def test_the_size_benchmark_counts_the_template_and_the_projects_copier_makes():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.size", "--projects"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line for line in done.stdout.splitlines() if line.startswith("| ")}
    assert set(rows) == {"", "template", "no optional part", "the default parts"}
    app = {name: int(row.split("|")[2].strip().replace(",", "")) for name, row in rows.items() if name}
    assert app["no optional part"] < app["the default parts"] <= app["template"]
