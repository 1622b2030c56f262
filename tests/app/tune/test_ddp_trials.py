"""Trials that are whole DDP jobs (2 gloo processes on CPU): every rank trains with the trial's values, and
a pruned trial stops as a whole, its processes ended and its ``last.ckpt`` saved where it stopped."""

import csv
import json
from pathlib import Path

import pytest
import torch
import yaml
from helpers.cli import callback, check, run_app

pytestmark = pytest.mark.distributed

DDP = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp", "--trainer.max_epochs=3"]


def processes_naming(text: str) -> list[int]:
    """The pids of the processes whose command line holds ``text``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if text in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.full
def test_ddp_trials_train_with_one_draw_and_are_pruned_as_a_whole(mnist_root, tmp_path):
    space = tmp_path / "space.yaml"
    parameters = {"model.optimizer.lr": {"values": [0.01, 0.03]}, "data.batch_size": {"value": 16}}
    space.write_text(
        yaml.safe_dump({"metric": {"name": "val/acc", "goal": "maximize"}, "parameters": parameters})
    )
    prune_all = {"class_path": "optuna.pruners.ThresholdPruner", "init_args": {"lower": 2.0}}  # val/acc < 2
    result = run_app(
        "tune",
        f"--data.root={mnist_root}",
        f"--tune.space={space}",
        "--tune.trials=2",
        f"--tune.pruner={json.dumps(prune_all)}",
        *DDP,
        callback("helpers.recipe_probe.RecipeProbe"),
        cwd=tmp_path,
    )
    check(result)
    folder = tmp_path / "runs" / "tune" / "space"
    rows = list(csv.DictReader((folder / "trials.csv").open()))
    assert [r["state"] for r in rows] == ["PRUNED", "PRUNED"]  # the study ends with the count asked for
    assert result.stderr.count("pruned after 1 validation(s)") == 2
    assert not processes_naming(str(folder))  # no rank outlives its trial
    lrs = []
    for row in rows:
        run = folder / row["run"] / "version_0"
        # Stopped together after the first epoch's validation (4 steps of 3 epochs), last.ckpt saved there.
        assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 4
        ranks = [json.loads((run / "recipe" / f"rank{r}.json").read_text()) for r in (0, 1)]
        assert ranks[0] == {**ranks[1]} and ranks[0]["world_size"] == 2 and ranks[0]["batch_size"] == 16
        lrs.append((float(row["model.optimizer.lr"]), ranks[0]["optimizer"]["initial_lr"]))
    # Trial 0 is the config's own lr; each trial's ranks train with its draw (scaled to the world size alike).
    assert lrs[0][0] == 0.01
    assert lrs[1][1] / lrs[0][1] == pytest.approx(lrs[1][0] / lrs[0][0])
