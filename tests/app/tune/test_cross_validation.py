"""``tune --tune.folds K`` with no search space: the config cross-validated, K fits (one run folder each,
grouped under the trial), mean ± std printed and kept."""

import csv
import statistics

import pytest
import yaml
from helpers.cli import ROOT, check, logged, run_app

pytestmark = pytest.mark.distributed  # its fits are processes


@pytest.mark.full
def test_cross_validation_of_one_config(mnist_root, tmp_path):
    result = run_app("tune", f"--data.root={mnist_root}", "--tune.folds=2", cwd=tmp_path)
    check(result)
    folder = tmp_path / "runs" / "tune" / "cv"
    scores = []
    for fold in range(2):
        run = folder / "trial-000" / f"fold-{fold}" / "version_0"
        data = yaml.safe_load((run / "config.yaml").read_text())["data"]["init_args"]
        assert (data["folds"], data["fold"]) == (2, fold)
        scores.append(max(logged(run)["val/acc"]))
    (row,) = csv.DictReader((folder / "trials.csv").open())
    assert row["state"] == "COMPLETE"
    assert float(row["value"]) == pytest.approx(statistics.fmean(scores))
    assert float(row["std"]) == pytest.approx(statistics.stdev(scores))
    mean, spread = statistics.fmean(scores), statistics.stdev(scores)
    assert f"val/acc {mean:.4f} ± {spread:.4f} over 2 folds" in result.stderr


def test_a_cross_validation_is_named_after_its_config(mnist_root):
    from app.tune.search import Tune

    config = ROOT / "configs" / "mnist.yaml"
    given = [f"--config={config}", f"--data.root={mnist_root}"]
    assert Tune(["--tune.folds=2", *given]).name == "cv-mnist"
    assert Tune(["--tune.folds=2", f"--data.root={mnist_root}"]).name == "cv"
