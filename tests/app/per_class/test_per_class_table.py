"""Per-class metrics through the CLI: macro scores logged, the per-class table printed, written and
sent to W&B, the same whatever the number of processes."""

import csv
import json
from pathlib import Path

import pytest
import torch
from helpers.cli import SHRINK_WANDB, check, logged, run_app, run_folder, run_process, wandb_offline_env
from helpers.wandb_files import records
from torchmetrics.classification import MulticlassStatScores
from torchvision.datasets import FashionMNIST

from app.per_class import describe, per_class

MACRO = ["f1_macro", "precision_macro", "recall_macro"]


def rows(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.full
@pytest.mark.distributed
def test_two_processes_and_one_give_the_same_scores_and_table(fashion_mnist_root, tmp_path):
    """fit in 2 gloo processes (test set 251: shards of 126 and 125) monitors val/f1_macro and tests
    its best checkpoint; a test of it in one process logs the same and writes an equal second file."""
    data = ["--data=FashionMNISTDataModule", f"--data.root={fashion_mnist_root}", "--data.batch_size=32"]
    ddp = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]
    result = run_process("fit", *data, *ddp, "--checkpoint.monitor=val/f1_macro", cwd=tmp_path)
    check(result)
    run = run_folder(tmp_path)
    (best,) = run.glob("checkpoints/best-*.ckpt")
    state = torch.load(best, weights_only=False)["callbacks"]
    (saved,) = [v for k, v in state.items() if "'monitor': 'val/f1_macro'" in k]
    metrics = logged(run)
    assert saved["best_model_score"].item() == pytest.approx(metrics["val/f1_macro"][-1])
    assert f"best val/f1_macro {metrics['val/f1_macro'][-1]:.4f}" in result.stderr
    assert "test per class (251 samples; all in" in result.stderr

    one = ["--trainer.devices=1", "--trainer.strategy=auto", f"--ckpt_path={best}"]
    check(run_app("test", *one, cwd=tmp_path))
    metrics = logged(run)
    for key in [*(f"test/{name}" for name in MACRO), "test/acc_top5", "val/acc_top5"]:
        assert len(metrics[key]) == (1 if key.startswith("val") else 2), key
    for key in ("test/f1_macro", "test/precision_macro", "test/recall_macro", "test/acc_top5"):
        assert metrics[key][0] == metrics[key][1], key
    table = rows(run / "test-per-class.csv")
    assert rows(run / "test-per-class-2.csv") == table  # the first file was kept
    assert [row["class_name"] for row in table] == FashionMNIST.classes
    assert sum(int(row["support"]) for row in table) == 251
    f1 = sum(float(row["f1"]) for row in table) / len(table)  # every class has samples here
    assert f1 == pytest.approx(metrics["test/f1_macro"][0], abs=1e-6)


@pytest.mark.part("app.wandb_logger")
@pytest.mark.full
def test_few_classes_no_top5_and_the_wandb_run_gets_the_table(image_folder_root, tmp_path):
    # A process of its own, offline as on a machine not logged in: its W&B records are whole at exit.
    data = ["--data=ImageFolderDataModule", f"--data.root={image_folder_root}", "--data.batch_size=16"]
    env = wandb_offline_env(tmp_path)
    result = run_process("fit", *SHRINK_WANDB, *data, shrink=False, env=env, cwd=tmp_path)
    check(result)
    run = run_folder(tmp_path)
    table = rows(run / "test-per-class.csv")
    assert [row["class_name"] for row in table] == ["class_0", "class_1", "class_2"]
    assert "test per class (36 samples;" in result.stderr
    (records_file,) = run.glob("wandb/offline-run-*/run-*.wandb")
    history = [r.history for r in records(records_file) if r.WhichOneof("record_type") == "history"]
    logged_keys = {item.key or "/".join(item.nested_key) for step in history for item in step.item}
    assert {f"{stage}/{name}" for stage in ("val", "test") for name in MACRO} <= logged_keys
    assert not [key for key in logged_keys if "top5" in key]
    (sent,) = run.glob("wandb/offline-run-*/files/media/table/test/per_class_*.table.json")
    sent = json.loads(sent.read_text())
    assert sent["columns"] == list(table[0])
    assert [[str(value) for value in row[:3]] for row in sent["data"]] == [
        [row["class"], row["class_name"], row["support"]] for row in table
    ]


def test_many_classes_print_those_of_lowest_f1():
    table = [(k, f"c{k}", 10, 0.5, 0.5, f1) for k, f1 in enumerate([0.9, 0.1, 0.5, 0.3])]
    lines = describe(table, Path("RUN/test-per-class.csv"), print_rows=2).splitlines()
    assert lines[0] == "test per class (40 samples, the 2 of lowest F1; all in RUN/test-per-class.csv):"
    assert [line.split()[0] for line in lines[2:]] == ["c1", "c3"]


def test_per_class_scores_match_the_hand_computation():
    # 5 classes: class 3 is never predicted (precision 0/0), class 4 has neither samples nor predictions.
    target = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    preds = torch.tensor([0, 0, 1, 1, 1, 2, 2, 0, 2, 2])
    stats = MulticlassStatScores(5, average=None)
    stats.update(preds, target)
    found = per_class(stats.compute())
    assert found["support"].tolist() == [3, 3, 2, 2, 0]
    # By hand: class 0 tp 2 fp 1 fn 1; class 1 tp 2 fp 1 fn 1; class 2 tp 1 fp 3 fn 1; class 3 tp 0 fp 0 fn 2.
    expected = {
        "precision": [2 / 3, 2 / 3, 1 / 4, 0, 0],
        "recall": [2 / 3, 2 / 3, 1 / 2, 0, 0],
        "f1": [2 / 3, 2 / 3, 2 / 6, 0, 0],
    }
    for key, values in expected.items():
        assert found[key].tolist() == pytest.approx(values), key
