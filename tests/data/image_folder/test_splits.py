"""``ROOT/val/`` and ``ROOT/test/`` beside ``ROOT/train/``: which folder validates and which tests, with both
loaders, the balanced sampler, predict, export and 2 gloo processes, through the real CLI."""

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers.cli import callback, check, logged, needs_export, run_app, run_folder, run_process
from helpers.data_files import write_split

TRAIN, VAL, TEST = [12, 12, 12], [3, 5, 7], [4, 4, 4]  # images per class; no share of train/ has VAL's
FIT = ["--data=ImageFolderDataModule", "--data.batch_size=8", "--data.image_size=16", "--model.net=FastCNN"]
NOTE = "--data.val_size is not used"


def image_folder(root: Path, layout: str) -> Path:
    """``root`` with the splits of ``layout`` (``train/val/test``): train/ and test/ in PNG, val/ in JPEG."""
    write_split(root, "train", TRAIN)
    if "val" in layout:
        write_split(root, "val", VAL, suffix="jpg")
    if "test" in layout:
        write_split(root, "test", TEST)
    return root


def evaluated(probe: Path, stage: str) -> list[dict[str, list]]:
    """Per validation or test run, the labels and fingerprints the ranks evaluated, all ranks together."""
    ranks = [json.loads(f.read_text()) for f in sorted(probe.glob(f"{stage}-rank*.json"))]
    runs = [
        {key: [x for rank in run for x in rank[key]] for key in ("labels", "prints")}
        for run in zip(*ranks, strict=True)
    ]
    assert ranks and runs, f"no {stage} run recorded in {probe}"
    return runs


def per_class(labels: list[int]) -> list[int]:
    counts = Counter(labels)
    return [counts[k] for k in range(len(TRAIN))]


@pytest.mark.parametrize("loader", ["resident", "torch"])
@pytest.mark.parametrize("layout", ["train/val", "train/val/test", "train/test"])
def test_val_validates_test_tests_and_without_val_train_is_carved(layout, loader, tmp_path):
    root = image_folder(tmp_path / "images", layout)
    probe = tmp_path / "probe"
    args = [
        *FIT,
        f"--data.root={root}",
        f"--data.loader={loader}",
        callback("helpers.eval_probe.EvalProbe", folder=str(probe)),
    ]
    result = run_app("fit", *args, cwd=tmp_path / "run")
    check(result)
    output = result.stdout + result.stderr
    (val,) = evaluated(probe, "val")
    if "val" in layout:  # every val/ image once; --data.val_size=0.2 (SHRINK) said unused, once
        assert per_class(val["labels"]) == VAL and len(set(val["prints"])) == sum(VAL)
        assert output.count(NOTE) == 1
        assert f"data: validating on {root}/val (15 images), training on all 36 of {root}/train" in output
    else:  # a fifth of train/, as without val/ it always was
        assert len(val["labels"]) == round(0.2 * sum(TRAIN)) and NOTE not in output
    metrics = logged(run_folder(tmp_path / "run"))
    if "test" in layout:
        (test,) = evaluated(probe, "test")
        assert per_class(test["labels"]) == TEST and "test/acc" in metrics
    else:
        assert "fit: ImageFolderDataModule has no test split: fit ends without a test" in output
        assert not list(probe.glob("test-*")) and "test/acc" not in metrics
    cached = sorted(p.name.split("-")[1] for p in root.glob(".cache/decoded-*.pt"))
    assert cached == (sorted(layout.split("/")) if loader == "resident" else [])


@needs_export
def test_test_on_val_tests_and_predicts_val_with_balanced_sampling_and_exports(tmp_path):
    root = image_folder(tmp_path / "images", "train/val")
    probe = tmp_path / "probe"
    args = [
        *FIT,
        f"--data.root={root}",
        "--data.test_on=val",
        "--data.sampler=balanced",
        "--data.loader=torch",
    ]
    result = run_app("fit", *args, callback("helpers.eval_probe.EvalProbe", folder=str(probe)), cwd=tmp_path)
    check(result)
    (test,) = evaluated(probe, "test")
    assert per_class(test["labels"]) == VAL and "test/acc" in logged(run_folder(tmp_path))
    assert "no test split" not in result.stdout + result.stderr
    checkpoint = run_folder(tmp_path) / "checkpoints" / "last.ckpt"
    # The run's config.yaml brings --data.test_on val: predict reads val/, named relative to it.
    check(run_app("predict", f"--ckpt_path={checkpoint}", cwd=tmp_path))
    with open(run_folder(tmp_path) / "predictions.csv") as f:
        files = [row["file"] for row in csv.DictReader(f)]
    assert files == sorted(p.relative_to(root / "val").as_posix() for p in root.glob("val/*/*.jpg"))
    # The input's shape comes from the run's DataModule whatever the format; TorchScript's trace is the
    # quicker (an image folder's ONNX file: tests/app/test_data_card.py).
    check(run_app("export", f"--ckpt_path={checkpoint}", "--format=torchscript", cwd=tmp_path))
    assert (run_folder(tmp_path) / "model.pt").stat().st_size > 0


@pytest.mark.full
@pytest.mark.distributed
@pytest.mark.parametrize("loader", ["resident", "torch"])
def test_two_gloo_processes_validate_on_every_val_image_once(loader, tmp_path):
    """15 val/ images over 2 ranks (8 and 7: not padded), 12 test/ images; the note said once."""
    root = image_folder(tmp_path / "images", "train/val/test")
    probe = tmp_path / "probe"
    args = [*FIT, f"--data.root={root}", f"--data.loader={loader}", "--trainer.max_epochs=2"]
    args += ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]
    result = run_process(
        "fit", *args, callback("helpers.eval_probe.EvalProbe", folder=str(probe)), cwd=tmp_path
    )
    check(result)
    assert (result.stdout + result.stderr).count(NOTE) == 1
    shares = [len(json.loads((probe / f"val-rank{r}.json").read_text())[0]["labels"]) for r in (0, 1)]
    assert shares == [8, 7]
    for val in evaluated(probe, "val"):  # each epoch
        assert per_class(val["labels"]) == VAL and len(set(val["prints"])) == sum(VAL)
    (test,) = evaluated(probe, "test")
    assert per_class(test["labels"]) == TEST and len(set(test["prints"])) == sum(TEST)
