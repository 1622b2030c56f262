"""configs/finetune.yaml as the README's "Your own images" runs it: pretrained ResNet-34 weights from
torch's hub cache, the body frozen, then predictions and an ONNX file from the checkpoint alone."""

import csv
import json
import shutil

import onnx
import torch
import torchvision
from helpers.cli import check, needs_export, run_app, run_folder
from helpers.data_files import write_photo_folder
from torchvision.models import ResNet34_Weights

from models.nets import weights as hub


@needs_export
def test_finetune_preset_trains_the_head_of_cached_resnet34_weights_and_exports(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    torch.manual_seed(0)
    weights = torchvision.models.resnet34().state_dict()
    cached = hub.cache_path(ResNet34_Weights.IMAGENET1K_V1.url)
    cached.parent.mkdir(parents=True)
    torch.save(weights, cached)
    photos = write_photo_folder(tmp_path / "photos", per_class=8)
    # The preset as given, shrunk: 32 px photos (ResNet-34 pools them to 1 x 1), batch 8, 3 steps.
    shrink = ["--data.image_size=32", "--data.batch_size=8", "--trainer.limit_train_batches=3"]
    fit = run_app("fit", f"--data.root={photos}", *shrink, configs=("configs/finetune.yaml",), cwd=tmp_path)
    check(fit)
    assert "test/acc" in fit.stdout
    run = run_folder(tmp_path)
    trained = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    body = {k: v for k, v in weights.items() if not k.startswith("fc.") and "num_batches" not in k}
    assert all(torch.equal(trained[f"net.model.{k}"], v) for k, v in body.items())  # frozen, BN stats too
    assert trained["net.model.fc.weight"].shape == (3, 512)

    shutil.rmtree(photos / "train")  # a deployed model needs no training data
    best = next((run / "checkpoints").glob("best-*.ckpt"))
    check(run_app("predict", f"--ckpt_path={best}", f"--data.predict_dir={photos / 'test'}", cwd=tmp_path))
    with open(run / "predictions.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 24 and {row["class_name"] for row in rows} <= {"class_0", "class_1", "class_2"}
    check(run_app("export", f"--ckpt_path={best}", "--format=onnx", cwd=tmp_path))
    metadata = {p.key: p.value for p in onnx.load(str(run / "model.onnx")).metadata_props}
    assert json.loads(metadata["class_names"]) == ["class_0", "class_1", "class_2"]
