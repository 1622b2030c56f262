"""``tune --tune.seeds N``: the config trained over N seeds (one run folder each, grouped under the trial),
mean ± std printed and kept, each seed's value a column of ``trials.csv``; with ``--tune.folds K``, N x K
fits."""

import csv
import statistics

import pytest
import yaml
from helpers.cli import ROOT, check, logged, run_app
from jsonargparse import Namespace

pytestmark = pytest.mark.distributed  # its fits are processes


def seed_and_score(run) -> tuple[int, float]:
    """The seed a fit ran with (its config.yaml) and its best val/acc (its logged values)."""
    return yaml.safe_load((run / "config.yaml").read_text())["seed_everything"], max(logged(run)["val/acc"])


@pytest.mark.full
def test_repeats_over_seeds_report_their_mean_and_spread(mnist_root, tmp_path):
    result = run_app(
        "tune", f"--data.root={mnist_root}", "--tune.seeds=2", "--seed_everything=7", cwd=tmp_path
    )
    check(result)
    folder = tmp_path / "runs" / "tune" / "seeds"
    runs = sorted((folder / "trial-000").glob("seed-*/version_0"))
    found = dict(seed_and_score(run) for run in runs)
    assert sorted(found) == [7, 8]  # the config's seed first, each a fit of its own
    assert [run.parent.name for run in runs] == ["seed-7", "seed-8"]
    mean, spread = statistics.fmean(found.values()), statistics.stdev(found.values())
    (row,) = csv.DictReader((folder / "trials.csv").open())
    assert row["state"] == "COMPLETE"
    assert {seed: float(row[f"seed {seed}"]) for seed in found} == pytest.approx(found)
    assert (float(row["value"]), float(row["std"])) == pytest.approx((mean, spread))
    assert f"val/acc {mean:.4f} ± {spread:.4f} over 2 seeds" in result.stderr
    assert "trial 0: started, log runs/tune/seeds/trial-000/seed-7/output.log (fit 1 of 2)" in result.stderr
    best = yaml.safe_load((folder / "best.yaml").read_text())
    assert best["seed_everything"] == 7  # the first seed's run: the config as given


@pytest.mark.full
def test_seeds_and_folds_compose(mnist_root, tmp_path):
    args = [f"--data.root={mnist_root}", "--tune.seeds=2", "--tune.folds=2", "--seed_everything=3"]
    result = run_app("tune", *args, cwd=tmp_path)
    check(result)
    folder = tmp_path / "runs" / "tune" / "cv"
    by_seed = {}
    for seed in (3, 4):
        scores = []
        for fold in range(2):
            run = folder / "trial-000" / f"seed-{seed}" / f"fold-{fold}" / "version_0"
            data = yaml.safe_load((run / "config.yaml").read_text())["data"]["init_args"]
            assert (data["folds"], data["fold"]) == (2, fold)
            ran_with, score = seed_and_score(run)
            assert ran_with == seed
            scores.append(score)
        by_seed[seed] = statistics.fmean(scores)
    (row,) = csv.DictReader((folder / "trials.csv").open())
    assert {seed: float(row[f"seed {seed}"]) for seed in by_seed} == pytest.approx(by_seed)
    mean, spread = statistics.fmean(by_seed.values()), statistics.stdev(by_seed.values())
    assert (float(row["value"]), float(row["std"])) == pytest.approx((mean, spread))
    assert f"val/acc {mean:.4f} ± {spread:.4f} over 2 seeds (each the mean over 2 folds)" in result.stderr


def test_repeats_over_seeds_are_named_after_their_config_and_are_a_study_of_their_own(mnist_root):
    from app.tune.identity import identity
    from app.tune.search import Tune

    config = ROOT / "configs" / "mnist.yaml"
    given = [f"--config={config}", f"--data.root={mnist_root}"]
    seeds = Tune(["--tune.seeds=3", *given])
    assert (seeds.name, seeds.seeds) == ("seeds-mnist", [42, 43, 44])
    assert seeds.settings["tune.seeds"] == 3
    assert Tune(["--tune.seeds=2", "--tune.folds=2", *given]).name == "cv-mnist"
    # One seed is no repeat: a study keeps the settings it was made with before there were seeds.
    assert "tune.seeds" not in identity(Namespace(seed_everything=1), [], "space", 2, 1)
