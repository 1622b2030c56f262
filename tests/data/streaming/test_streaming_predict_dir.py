"""``predict --data.predict_dir`` for a checkpoint of shards: the files as ``predict_image`` sees them."""

import csv

import pytest
from helpers.cli import SHRINK, check, run_app, run_folder
from helpers.image_files import check_rows, predict_image_answers, write_image_files


@pytest.mark.full
def test_predict_dir_classifies_any_file_as_predict_image(mnist_shards, tmp_path):
    data = ["--data=StreamingDataModule", f"--data.root={mnist_shards}"]
    shrink = [arg for arg in SHRINK if not arg.startswith("--data.val_size")]  # the shards hold their split
    check(run_app("fit", *shrink, *data, "--test_after_fit=false", cwd=tmp_path, shrink=False))
    run = run_folder(tmp_path)
    files = write_image_files(tmp_path / "mine")
    ckpt = run / "checkpoints" / "last.ckpt"
    check(
        run_app(
            "predict",
            f"--ckpt_path={ckpt}",
            f"--data.predict_dir={tmp_path / 'mine'}",
            cwd=tmp_path,
            shrink=False,
        )
    )
    with open(run / "predictions.csv", newline="") as f:
        check_rows(list(csv.DictReader(f)), predict_image_answers(ckpt, files))
