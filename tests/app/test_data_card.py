"""A checkpoint knows its data: ``predict`` and ``export`` work from it alone, the training images gone."""

import csv
import json
import shutil
import warnings

import onnx
import torch
from helpers.cli import check, needs_export, run_app, run_folder


@needs_export
def test_predict_and_export_after_the_training_data_is_deleted(image_folder_root, tmp_path):
    root = shutil.copytree(image_folder_root, tmp_path / "images")
    photos = shutil.copytree(root / "test", tmp_path / "new_photos")
    args = [
        "--data=ImageFolderDataModule",
        f"--data.root={root}",
        "--data.image_size=20",
        "--data.batch_size=8",
    ]
    check(run_app("fit", *args, "--test_after_fit=false", cwd=tmp_path))
    run = run_folder(tmp_path)
    ckpt = run / "checkpoints" / "last.ckpt"
    card = {
        "class_names": ["class_0", "class_1", "class_2"],
        "num_classes": 3,
        "in_channels": 3,
        "image_size": 20,
        "resize_size": 23,  # 20 / 0.875: short side, then the centre crop
        "mean": [0.485, 0.456, 0.406],  # ImageNet's, the image folder's default
        "std": [0.229, 0.224, 0.225],
    }
    assert torch.load(ckpt, weights_only=True)["data"] == card
    shutil.rmtree(root)

    check(run_app("predict", f"--ckpt_path={ckpt}", f"--data.predict_dir={photos}", cwd=tmp_path))
    with open(run / "predictions.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 36 and {r["class_name"] for r in rows} <= set(card["class_names"])
    assert all(r["class_name"] == card["class_names"][int(r["class"])] for r in rows)

    check(run_app("export", f"--ckpt_path={ckpt}", cwd=tmp_path))
    metadata = {p.key: json.loads(p.value) for p in onnx.load(str(run / "model.onnx")).metadata_props}
    assert metadata == {**card, "input_dtype": "uint8", "output": "probabilities"}
    check(run_app("export", f"--ckpt_path={ckpt}", "--format=torchscript", cwd=tmp_path))
    files = {"data.json": ""}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.load` is deprecated")
        torch.jit.load(run / "model.pt", _extra_files=files)
    assert json.loads(files["data.json"]) == {**card, "input_dtype": "uint8", "output": "probabilities"}
