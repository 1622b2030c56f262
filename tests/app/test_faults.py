"""Faults met mid-run, injected for real into ``python -m app fit`` processes: each ends in one ``error:``
line saying what happened and what to run, or is survived as promised; nothing saved is lost."""

import errno
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers.cli import (
    app_args,
    app_command,
    app_env,
    callback,
    check,
    load_probe,
    max_difference,
    one_error_line,
    probe,
    run_app,
    run_folder,
    small_disk,
)
from helpers.data_files import corrupt_jpeg, write_image_folder, write_photo_folder

from app.runs.checkpoints import intact

IMAGE_FOLDER = ["--data=ImageFolderDataModule", "--data.loader=torch", "--data.batch_size=4"]


@pytest.mark.part("data.image_folder")
def test_unreadable_images_are_left_out_counted_and_never_mislabelled(tmp_path):
    """With ``--data.skip_unreadable`` a JPEG cut in half leaves its batch (label and all); each stage
    that met one says so in one line at its end."""
    root = write_photo_folder(tmp_path / "photos", per_class=4)
    shutil.copytree(root / "test", root / "val")  # so all of train/ trains
    cut_train = corrupt_jpeg(root / "train" / "class_2" / "cut.jpg")
    cut_test = corrupt_jpeg(root / "test" / "class_1" / "cut.jpg")
    seen = tmp_path / "labels.json"
    args = [*IMAGE_FOLDER, f"--data.root={root}", "--data.num_workers=1", "--data.skip_unreadable=true"]
    args += ["--trainer.limit_train_batches=1.0"]
    args += [callback("helpers.labels_seen.LabelsSeen", file=str(seen))]
    result = run_app("fit", *args, cwd=tmp_path)
    check(result)
    lines = [line for line in result.stderr.splitlines() if "left out" in line]
    count = "left out 1 unreadable image(s) (--data.skip_unreadable)"
    assert lines == [
        f"data: fit {count}: {cut_train}; delete or replace them",
        f"data: test {count}: {cut_test}; delete or replace them",
    ]
    # The epoch fed every readable training image once, under its own folder's label.
    readable = Counter(int(p.parent.name.split("_")[1]) for p in (root / "train").glob("*/[0-9]*.*"))
    assert [Counter(epoch) for epoch in json.loads(seen.read_text())] == [readable]


def wait_for(pattern: str, cwd: Path, process: subprocess.Popen, timeout: float = 120) -> Path:
    """The first file under ``cwd`` matching ``pattern``, once ``process`` has written it."""
    deadline = time.monotonic() + timeout
    while not (found := sorted(cwd.glob(pattern))):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-3000:]
        time.sleep(0.05)
    return found[0]


def loader_data(path: str, tmp_path: Path, mnist_root: Path) -> list[str]:
    """The data flags of a small training set on the image-folder or the streaming path."""
    if path == "image folder":
        if importlib.util.find_spec("data.image_folder") is None:
            pytest.skip("the project was made without data.image_folder")
        return [*IMAGE_FOLDER, f"--data.root={write_image_folder(tmp_path / 'images', per_class=12)}"]
    if importlib.util.find_spec("data.streaming") is None or importlib.util.find_spec("litdata") is None:
        pytest.skip("the project was made without data.streaming, or its extra is not installed")
    from data.mnist import MNISTDataModule
    from data.streaming.writer import shard

    shards = str(tmp_path / "shards")  # 400 training samples, 10 a chunk
    shard(MNISTDataModule(root=str(mnist_root), val_size=400), shards, workers=1, chunk_size=10)
    return ["--data=StreamingDataModule", f"--data.root={shards}", "--data.batch_size=20"]


@pytest.mark.full
@pytest.mark.distributed  # processes started and killed
@pytest.mark.parametrize("path", ["image folder", "streaming"])
def test_a_killed_loader_worker_is_one_line_and_resume_is_exact(path, mnist_root, tmp_path):
    """SIGKILL to a DataLoader worker, as the kernel's out-of-memory killer sends: the line names it, the
    likely cause and the flag; ``--ckpt_path last`` then ends with the weights of an uninterrupted run."""
    started = tmp_path / "started"
    slow = callback("helpers.stops.SlowSteps", seconds=0.2, started=str(started))
    args = [*loader_data(path, tmp_path, mnist_root), "--data.num_workers=1", "--test_after_fit=false"]
    args += ["--trainer.limit_train_batches=1.0", "--last_checkpoint.every_n_steps=2", slow]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    check(run_app("fit", *args, probe(whole / "probe"), cwd=whole))
    cut.mkdir()
    process = subprocess.Popen(
        app_command("fit", *args),
        cwd=cut,
        env=app_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The run folder is made a moment after runs/: wait for the checkpoint itself.
    last = wait_for("runs/*/version_0/checkpoints/last.ckpt", cut, process)
    workers = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    os.kill(int(workers[0]), signal.SIGKILL)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    resume = shlex.join(["python", "-m", "app", *app_args("fit", *args), "--ckpt_path", "last"])
    assert one_error_line(stderr) == (
        "error: a DataLoader worker process died, most likely killed by the kernel for want of memory "
        "(dmesg says): pass a smaller --data.num_workers (or --data.batch_size); resume with: "
        f"{resume} (from {last.relative_to(cut)})"
    )
    assert intact(last)
    check(run_app("fit", *args, probe(cut / "probe"), "--ckpt_path=last", cwd=cut))
    ends = [load_probe(folder / "probe", "end", 0) for folder in (whole, cut)]
    assert ends[0]["global_step"] == ends[1]["global_step"]
    assert max_difference(ends[0]["weights"], ends[1]["weights"]) == 0


def files_of(folder: Path) -> dict[Path, str]:
    """A digest of each file under ``folder`` but the run's lock (each command writes its own line there)."""
    # Line by line: the CSV logger writes metrics.csv again with other line ends, the same rows.
    return {
        p: hashlib.sha256(b"\n".join(p.read_bytes().splitlines())).hexdigest()
        for p in folder.rglob("*")
        if p.is_file() and p.name != ".lock"
    }


@pytest.mark.full
def test_a_full_disk_for_predictions_or_config_is_one_line_and_nothing_is_lost(
    mnist_root, trained_here, tmp_path
):
    """predictions.csv, or a resume's config.yaml, meets a full disk (the file-size limit): one line names
    the folder and the bytes needed; no partial file, the run's files as they were; with room, both work."""
    data = f"--data.root={mnist_root}"
    run = trained_here
    before = files_of(run)
    commands = {
        "predictions.csv": [
            "predict",
            f"--ckpt_path={(run / 'checkpoints' / 'last.ckpt').relative_to(tmp_path)}",
            data,
        ],
        "config.yaml": ["fit", data, "--test_after_fit=false", "--trainer.max_epochs=2", "--ckpt_path=last"],
    }
    then = {
        "predictions.csv": "and run the command again",
        "config.yaml": "or pass another --trainer.default_root_dir",
    }
    for name, (subcommand, *args) in commands.items():
        full = subprocess.run(
            app_command(subcommand, *args),
            cwd=tmp_path,
            env=app_env(),
            capture_output=True,
            text=True,
            timeout=300,
            preexec_fn=small_disk(1000),  # below either file's size, above the run's lock line
        )
        assert full.returncode == 1
        line = one_error_line(full.stderr)
        assert files_of(run) == before  # no partial file, nothing replaced
        check(run_app(subcommand, *args, cwd=tmp_path))
        size = (run / name).stat().st_size
        assert size > 1000
        assert line == (
            f"error: no room for {name} in {run.relative_to(tmp_path)} ({os.strerror(errno.EFBIG)}): "
            f"it needs {size:,} bytes; free that much there {then[name]}"
        )
        before = files_of(run)


@pytest.mark.full
def test_a_full_disk_for_the_decoded_copy_is_survived_in_memory(tmp_path):
    """The decoded copy of an image folder outgrows the file-size limit: one line says so and how much it
    needs, no partial file is left, and the run decodes in memory instead."""
    root = write_image_folder(tmp_path / "images", per_class=12)
    args = [*IMAGE_FOLDER, f"--data.root={root}", "--test_after_fit=false"]
    check(run_app("fit", *args, cwd=tmp_path))  # the DataLoader: no decoded copy
    last = run_folder(tmp_path) / "checkpoints" / "last.ckpt"
    validate = app_command("validate", f"--ckpt_path={last}", "--data.loader=resident")
    result = subprocess.run(
        validate,
        cwd=tmp_path,
        env=app_env(),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=small_disk(20_000),  # below the decoded copy of train/ (or test/): 36 photos at 37 px
    )
    check(result)
    needs = 36 * 3 * 37 * 37
    line = (
        f"data: cannot keep the decoded copy in {root}/.cache ({os.strerror(errno.EFBIG)}: it needs "
        f"{needs:,} bytes there)"
    )
    assert line in result.stderr.splitlines(), result.stderr[-3000:]
    assert "decodes" in result.stderr and "in memory" in result.stderr
    assert list((root / ".cache").iterdir()) == []  # no partial file


def test_two_stops_at_epoch_ends_in_a_row_train_each_epoch_once(tmp_path):
    """Stopped after the last batch of epoch 0, resumed, stopped after the last batch of epoch 1, resumed:
    3 epochs of 8 steps end at step 24 with an uninterrupted run's weights (the soak test found epoch 1
    trained twice: Lightning resumes a checkpoint taken at an epoch's last batch end into an epoch it does
    not count)."""
    root = write_image_folder(tmp_path / "images", per_class=12)
    args = [*IMAGE_FOLDER, f"--data.root={root}", "--data.num_workers=1", "--test_after_fit=false"]
    args += ["--trainer.limit_train_batches=1.0", "--trainer.max_epochs=3"]
    args.append("--last_checkpoint.every_n_steps=2")
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    check(run_app("fit", *args, probe(whole / "probe"), cwd=whole))
    for step in (8, 16):
        stop = callback("helpers.stops.SigtermAt", step=step)
        stopped = run_app("fit", *args, stop, "--ckpt_path=last", cwd=cut)
        assert stopped.returncode == 143, stopped.stderr[-3000:]
    check(run_app("fit", *args, probe(cut / "probe"), "--ckpt_path=last", cwd=cut))
    ends = [load_probe(folder / "probe", "end", 0) for folder in (whole, cut)]
    assert ends[0]["global_step"] == ends[1]["global_step"] == 24
    assert max_difference(ends[0]["weights"], ends[1]["weights"]) == 0
