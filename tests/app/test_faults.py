"""Faults met mid-run, injected for real into ``python -m app fit`` processes: each ends in one ``error:``
line saying what happened and what to run, or is survived as promised; nothing saved is lost."""

import json
import shutil
from collections import Counter

from helpers.cli import callback, check, run_process
from helpers.data_files import corrupt_jpeg, write_photo_folder

IMAGE_FOLDER = ["--data=ImageFolderDataModule", "--data.loader=torch", "--data.batch_size=4"]


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
    result = run_process("fit", *args, cwd=tmp_path)
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
