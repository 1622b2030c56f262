"""The study folder where the best trial ran on a machine whose run folders this one does not see."""

import csv

import optuna
from optuna.distributions import FloatDistribution

from app.tune import results
from app.tune.space import Space
from app.tune.study import HOST, RUN

LR = "model.optimizer.lr"


def test_a_best_run_on_another_machine_is_named_and_no_best_yaml_is_written(tmp_path, capsys):
    lr = FloatDistribution(1e-3, 1e-1, log=True)
    study = optuna.create_study(direction="maximize")
    for number, (value, host) in enumerate([(0.80, "node-1"), (0.91, "node-7")]):
        trial = optuna.trial.create_trial(
            value=value,
            params={LR: 0.01 * (number + 1)},
            distributions={LR: lr},
            user_attrs={RUN: f"trial-{number:03d}"},
            system_attrs={HOST: host},
        )
        study.add_trial(trial)
    seen = tmp_path / "trial-000" / "version_0"  # the weaker trial ran on this machine
    seen.mkdir(parents=True)
    (seen / "config.yaml").write_text("trainer: {}\n")
    results.write(study, tmp_path, Space({LR: lr}, {}, "val/acc", "maximize"), base=None, draw=False)
    assert capsys.readouterr().err.splitlines() == [
        f"best: trial 1's run {tmp_path / 'trial-001'} is on node-7, not seen here: no best.yaml",
        "best: trial 1, val/acc 0.9100",
    ]
    assert not (tmp_path / "best.yaml").exists()
    with open(tmp_path / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(row["run"], row["value"]) for row in rows] == [("trial-000", "0.8"), ("trial-001", "0.91")]
