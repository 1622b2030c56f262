"""``python -m app shard``: the splits of a real image folder and of MNIST, as LitData reads them back."""

import io
import json
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import app_command, app_env, check, one_error_line, run_app, small_disk
from litdata import StreamingDataset
from PIL import Image

from data.mnist import MNISTDataModule


def read_back(split: Path) -> list[dict]:
    dataset = StreamingDataset(str(split))
    return sorted((dataset[i] for i in range(len(dataset))), key=lambda item: item["index"])


def test_an_image_folder_is_stored_as_its_files_bytes(image_folder_root, tmp_path):
    ImageFolderDataModule = pytest.importorskip("data.image_folder").ImageFolderDataModule  # an optional part
    check(
        run_app(
            "shard",
            "--data=ImageFolderDataModule",
            f"--data.root={image_folder_root}",
            "--data.val_size=6",
            f"--output={tmp_path / 's'}",
            cwd=tmp_path,
            shrink=False,
        )
    )
    assert not list(tmp_path.glob("runs/*/*"))  # shard leaves no run folder behind
    side = json.loads((tmp_path / "s" / "streaming.json").read_text())
    assert side["splits"] == {"train": 30, "val": 6, "test": 36}
    assert side["card"]["class_names"] == ["class_0", "class_1", "class_2"]
    assert side["source"]["class_path"] == "data.image_folder.datamodule.ImageFolderDataModule"
    # The same split as the DataModule's own, each image the file's bytes as read from disk.
    data = ImageFolderDataModule(str(image_folder_root), val_size=6)
    data.setup("fit")
    data.setup("test")
    for name, subset in (("train", data.train_set), ("val", data.val_set), ("test", data.test_set)):
        items = read_back(tmp_path / "s" / name)
        files = [subset.dataset.samples[k] for k in subset.indices]
        assert [item["label"] for item in items] == [label for _, label in files]
        assert [item["image"] for item in items] == [Path(path).read_bytes() for path, _ in files]


def test_mnist_is_stored_as_lossless_png(mnist_root, mnist_shards):
    data = MNISTDataModule(str(mnist_root), val_size=100)
    data.setup("fit")
    items = read_back(mnist_shards / "val")
    assert len(items) == 100
    for item, k in zip(items, data.val_set.indices, strict=True):
        pixels = np.array(Image.open(io.BytesIO(item["image"])))
        assert Image.open(io.BytesIO(item["image"])).format == "PNG"
        assert np.array_equal(pixels, data.val_set.dataset.data[k].numpy())
        assert item["label"] == int(data.val_set.dataset.targets[k])


def leftovers(output: Path) -> list[str]:
    """``pid: command line`` of each process whose command line names ``output``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            line = (proc / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if str(output).encode() in line:
            found.append(f"{proc.name}: {line.replace(bytes(1), b' ').decode(errors='replace')[:200]}")
    return found


@pytest.mark.full
def test_a_full_disk_while_sharding_says_so_in_one_line_and_leaves_nothing(image_folder_root, tmp_path):
    output = tmp_path / "s"
    args = ["--data=ImageFolderDataModule", f"--data.root={image_folder_root}", f"--output={output}"]
    # stderr through a pipe, read by a thread: a file would be held to the same size limit as the shards,
    # and LitData's leftover processes (below) keep the pipe open after the command ends.
    full = subprocess.Popen(
        app_command("shard", *args, shrink=False),
        cwd=tmp_path,
        env={**app_env(), "PYTHONFAULTHANDLER": "1"},  # its threads' stacks on SIGABRT, should it hang
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=small_disk(4000),  # below one split's chunk (32 photos of 20 px)
    )
    said: list[bytes] = []
    reader = threading.Thread(target=lambda: said.extend(full.stderr), daemon=True)
    reader.start()
    try:
        full.wait(timeout=300)
    except subprocess.TimeoutExpired:
        hung = "\n".join(leftovers(output))
        full.send_signal(signal.SIGABRT)
        full.wait()
        reader.join(timeout=10)
        stacks = b"".join(said).decode(errors="replace")[-6000:]
        pytest.fail(f"shard hung 300 s on a full disk; its processes:\n{hung}\nits stderr:\n{stacks}")
    # Refused before LitData starts a writer process (one stopped by a full disk can leave the others
    # waiting on it for good): none is left behind.
    assert not leftovers(output)
    reader.join(timeout=30)
    assert full.returncode == 1
    line = one_error_line(b"".join(said).decode())
    assert line.startswith(f"error: no room for the shards in {output} ("), line
    assert not output.exists() and not list(tmp_path.glob(".*"))  # no partial shard, no probe file
    check(run_app("shard", *args, cwd=tmp_path, shrink=False))  # with room, the same command writes them
    assert json.loads((output / "streaming.json").read_text())["splits"]["test"] == 36
