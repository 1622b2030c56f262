"""DDP training, 2 gloo processes, from shards in a local folder and in a real S3 server on 127.0.0.1."""

import json

import pytest
import torch
from helpers.cli import check, load_probe, logged, probe, run_app, run_folder, run_process

pytestmark = pytest.mark.distributed
DDP = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]
# 540 training samples at batch 27: 10 steps a rank an epoch.
FIT = ["--data=StreamingDataModule", "--data.batch_size=27", "--trainer.limit_train_batches=1.0"]


@pytest.mark.full
def test_ddp_trains_from_local_shards_and_tests_on_their_test_split(mnist_shards, tmp_path):
    result = run_process("fit", *DDP, *FIT, f"--data.root={mnist_shards}", probe(tmp_path), cwd=tmp_path)
    check(result)
    assert (
        load_probe(tmp_path, "end", 0)["global_step"] == load_probe(tmp_path, "end", 1)["global_step"] == 10
    )
    metrics = logged(run_folder(tmp_path))
    assert "val/acc" in metrics and "test/acc" in metrics
    # The card comes from the shards: MNIST's classes, input shape and normalization.
    card = torch.load(run_folder(tmp_path) / "checkpoints" / "last.ckpt", weights_only=True)["data"]
    assert card == {**json.loads((mnist_shards / "streaming.json").read_text())["card"]}
    assert card["class_names"][0] == "0 - zero" and card["in_channels"] == 1 and card["mean"] == [0.1307]


@pytest.mark.full
def test_ddp_trains_from_shards_in_s3(mnist_root, s3_server, s3_env, tmp_path):
    s3_server.client().create_bucket(Bucket="training")
    url = "s3://training/mnist"
    data = ["--data=MNISTDataModule", f"--data.root={mnist_root}", "--data.val_size=100"]
    check(run_app("shard", *data, f"--output={url}", cwd=tmp_path, shrink=False))
    listed = s3_server.client().list_objects_v2(Bucket="training", Prefix="mnist/")
    keys = {item["Key"] for item in listed["Contents"]}
    assert {"mnist/streaming.json", "mnist/train/index.json", "mnist/test/index.json"} <= keys
    args = [*DDP, *FIT, f"--data.root={url}", f"--data.cache_dir={tmp_path / 'cache'}"]
    result = run_process(
        "fit", *args, "--data.num_workers=1", probe(tmp_path / "probe"), cwd=tmp_path / "fit"
    )
    check(result)
    for rank in (0, 1):
        assert load_probe(tmp_path / "probe", "end", rank)["global_step"] == 10
    assert "test/acc" in logged(run_folder(tmp_path / "fit"))
