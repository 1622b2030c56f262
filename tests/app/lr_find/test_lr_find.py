"""``lr_find``: a range test of the run's own optimizer on its data, a plot and a table in a run folder of its
own, and one line whose flag ``fit`` takes."""

import csv
import json
import re
from pathlib import Path

import pytest
import yaml
from helpers.cli import check, one_error_line, run_app, run_folder, run_process

MIN_LR, MAX_LR = 1e-5, 1.0
# 32 batches of 16 in the one epoch SHRINK allows (16 a rank under DDP of 2): the 16 steps fit in it.
RANGE = [
    f"--min_lr={MIN_LR}",
    f"--max_lr={MAX_LR}",
    "--num_training=16",
    "--data.batch_size=16",
    "--trainer.limit_train_batches=1.0",
]
LINE = re.compile(
    r"lr_find: suggested lr (?P<lr>\S+)(?: \((?P<tested>\S+) in the test / (?P<factor>\S+), its \S+\))?; "
    r"use it with (?P<flag>\S+) (?P<value>\S+)$"
)
CPU2_DDP = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]


def suggestion(output: str) -> re.Match:
    (found,) = [m for m in map(LINE.search, output.splitlines()) if m]  # one line, however many ranks
    assert found["lr"] == found["value"], found[0]  # the flag's value is the lr it suggests
    return found


def optimizer(record: Path) -> list[str]:
    """The run's optimizer: SGD with a momentum and weight decay of its own, writing down its steps."""
    return [
        "--model.optimizer=helpers.recording_sgd.RecordingSGD",
        f"--model.optimizer.record={record}",
        "--model.optimizer.momentum=0.5",
        "--model.optimizer.weight_decay=0.003",
    ]


def test_suggests_an_lr_in_the_range_that_fit_takes(mnist_root, tmp_path):
    # Another run of the same name: lr_find leaves its files as they are and works in a folder of its own.
    other = tmp_path / "runs" / "MNIST-MnistCNN" / "version_0"
    (other / "checkpoints").mkdir(parents=True)
    (other / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    (other / "config.yaml").write_text("model: {}\n")
    before = {p: p.read_bytes() for p in other.rglob("*") if p.is_file()}
    steps = tmp_path / "steps.jsonl"

    result = run_app("lr_find", f"--data.root={mnist_root}", *RANGE, *optimizer(steps), cwd=tmp_path)
    check(result)
    found = suggestion(result.stderr + result.stdout)
    lr = float(found["lr"])
    assert MIN_LR <= lr <= MAX_LR

    run = run_folder(tmp_path, version=1)
    rows = list(csv.DictReader((run / "lr_find.csv").open()))
    lrs = [float(row["lr"]) for row in rows]
    assert len(rows) == 16 and lrs == sorted(lrs) and lrs[0] == pytest.approx(MIN_LR)
    assert lrs[0] <= lr <= lrs[-1] <= MAX_LR
    assert (run / "lr_find.png").read_bytes().startswith(b"\x89PNG")
    assert {p: p.read_bytes() for p in other.rglob("*") if p.is_file()} == before
    assert not list((tmp_path / "runs").glob(".lr_find*"))  # Lightning's copy of the weights, removed

    # The steps taken were the run's optimizer's, its other arguments as given, the lr the table's.
    taken = [json.loads(line) for line in steps.read_text().splitlines()]
    assert len(taken) == len(lrs)
    for groups, tested in zip(taken, lrs, strict=True):
        assert {(g["momentum"], g["weight_decay"]) for g in groups} == {(0.5, 0.003)}
        assert [g["lr"] for g in groups] == pytest.approx([tested] * len(groups))

    # The flag it names is fit's, and carries the value.
    printed = run_app(
        "fit", *optimizer(steps), found["flag"], found["value"], "--print_config", shrink=False, cwd=tmp_path
    )
    check(printed)
    assert yaml.safe_load(printed.stdout)["model"]["optimizer"]["init_args"]["lr"] == lr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--min_lr=0.1", "--max_lr=0.01"], "--min_lr 0.1 must be below --max_lr 0.01"),
        (["--num_training=5"], "--num_training 5 is too few"),
        (["--trainer.fast_dev_run=true"], "--trainer.fast_dev_run"),
        (["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp_spawn"], "ddp_spawn"),
    ],
)
def test_bad_input_gets_one_error_line_and_leaves_no_run(args, expected, mnist_root, tmp_path):
    result = run_app("lr_find", f"--data.root={mnist_root}", *args, cwd=tmp_path)
    assert result.returncode == 1
    assert expected in one_error_line(result.stderr)
    assert not list((tmp_path / "runs").glob("*/version_*"))


@pytest.mark.full
@pytest.mark.distributed
def test_under_ddp_the_suggestion_is_the_jobs_own(mnist_root, tmp_path):
    """Two gloo processes: one line, for the lr before its linear scaling to the world size of 2."""
    result = run_process("lr_find", f"--data.root={mnist_root}", *RANGE, *CPU2_DDP, cwd=tmp_path)
    check(result)
    found = suggestion(result.stderr + result.stdout)
    tested, lr = float(found["tested"]), float(found["lr"])
    assert float(found["factor"]) == 2 and lr == pytest.approx(tested / 2, rel=0.1)
    assert MIN_LR <= tested <= MAX_LR
    assert Path(run_folder(tmp_path), "lr_find.png").is_file()
