"""Bad input to ``python -m app tune``: one ``error:`` line, status 1, before any trial; nothing written."""

import os
import socket
import time

import optuna
import pytest
import yaml
from helpers.cli import SHRINK, run_app

from app.tune import study as tune_study
from app.tune.identity import IDENTITY
from app.tune.search import Tune

SPACE = {
    "metric": {"name": "val/acc", "goal": "maximize"},
    "parameters": {"model.optimizer.lr": {"values": [0.01]}},
}


def tuned(tmp_path, args: list[str]) -> Tune:
    """The tune process of ``python -m app tune ARGS`` (before it opens its study), made in this process."""
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(SPACE))
    return Tune([f"--tune.space={tmp_path / 'space.yaml'}", *SHRINK, *args])


def refused(tmp_path, *args: str, space: dict | None = SPACE) -> str:
    path = tmp_path / "space.yaml"
    if space is not None:
        path.write_text(yaml.safe_dump(space))
    given = [f"--tune.space={path}"] if space is not None else []
    result = run_app("tune", *given, *args, cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and lines[-1].startswith("error: "), result.stderr[-2000:]
    assert not [line for line in lines if line.startswith(("Traceback", "trial "))]
    # Nothing written:
    assert {p.name for p in tmp_path.iterdir()} <= {"space.yaml", "shared.db", "config.yaml"}
    return lines[-1]


@pytest.mark.parametrize(
    ("parameters", "said"),
    [
        (
            {"model.optimizer.lrr": {"values": [0.1]}},
            ["--tune.space: model.optimizer.lrr is no option of fit; close: model.optimizer.lr"],
        ),
        ({"data.batch_size": {"values": [64, 0]}}, ["data.batch_size=0", "PositiveInt"]),
        ({"data.batch_size": {"min": 0.5, "max": 64.0}}, ["data.batch_size=0.5"]),
        ({"model.label_smoothing": {"distribution": "normal", "mu": 0, "sigma": 1}}, ["normal", "supported"]),
    ],
)
def test_a_key_or_value_fit_refuses(parameters, said, mnist_root, tmp_path):
    line = refused(tmp_path, f"--data.root={mnist_root}", space={**SPACE, "parameters": parameters})
    for word in said:
        assert word in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.part("app.wandb_logger")
def test_a_metric_the_model_never_logs(mnist_root, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    # With the default logger (W&B's), which writes its files once a run has a folder.
    args = f"--data.root={mnist_root}", "--trainer.logger=app.wandb_logger.WandbLogger"
    line = refused(tmp_path, *args, space={**SPACE, "metric": {"name": "val/accuracy"}})
    assert "val/accuracy is never logged" in line and "val/acc" in line
    assert not (tmp_path / "runs").exists()


def test_neither_a_space_nor_folds_and_a_flag_of_neither(mnist_root, tmp_path):
    line = refused(tmp_path, f"--data.root={mnist_root}", space=None)
    assert all(flag in line for flag in ("--tune.space FILE", "--tune.folds K", "--tune.seeds N"))
    line = refused(tmp_path, f"--data.root={mnist_root}", "--tune.spaec=x.yaml", space=None)
    assert "--tune.spaec" in line and line.endswith("; close: --tune.space")
    # Typos of tune's flags and of fit's are told alike, by the CLI's parser.
    line = refused(tmp_path, f"--data.root={mnist_root}", "--tune.trails", "3", "--trainer.max_epochs=1")
    assert "--tune.trails" in line and line.endswith("; close: --tune.trials")
    assert "tune.trials" in refused(tmp_path, f"--data.root={mnist_root}", "--tune.trials=0")
    assert not (tmp_path / "runs").exists()


def test_a_tune_section_in_a_config_file(mnist_root, tmp_path):
    """Each trial's fit reads the --config files, and fit has no tune options: refused before any trial."""
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"tune": {"trials": 3}}))
    line = refused(tmp_path, f"--data.root={mnist_root}", "--config=config.yaml")
    assert "config.yaml" in line and "--tune.* flags" in line
    assert not (tmp_path / "runs").exists()


def test_help_lists_tunes_options_and_fits(tmp_path):
    result = run_app("tune", "--help", cwd=tmp_path, shrink=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: python -m app tune ")
    assert "--tune.space" in result.stdout and "--trainer.max_epochs" in result.stdout


def test_the_study_is_of_fits_settings_not_tunes_own(mnist_root, tmp_path):
    """A rerun with other --tune.* flags (but the space and folds) is the same study; no --tune.* flag
    reaches a trial's fit."""
    root = f"--data.root={mnist_root}"
    given = [
        "--tune.trials",
        "3",
        root,
        "--tune",
        '{"timeout": 60}',
        "--tune.storage=x.log",
        "--trainer.max_epochs=2",
    ]
    one = tuned(tmp_path, given)
    other = tuned(tmp_path, [root, "--tune.trials=5", "--trainer.max_epochs=2"])
    assert (one.count, other.count, one.options.timeout) == (3, 5, 60) and one.settings == other.settings
    assert [key for key in one.settings if key.startswith("tune")] == ["tune.space", "tune.folds"]
    assert one.fit_args == [*SHRINK, root, "--trainer.max_epochs=2"]


def test_a_storage_that_refuses_or_is_not_there(mnist_root, tmp_path):
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    started = time.monotonic()
    line = refused(
        tmp_path, f"--data.root={mnist_root}", f"--tune.storage=postgresql://me:secret@127.0.0.1:{port}/db"
    )
    assert f"127.0.0.1:{port}" in line and "secret" not in line
    # A hang guard, generous: a refused connection answers at once.
    waited = time.monotonic() - started
    assert waited < 60, f"tune hung {waited:.0f} s on a PostgreSQL port that refuses connections"
    line = refused(tmp_path, f"--data.root={mnist_root}", f"--tune.storage={tmp_path / 'no' / 'study.log'}")
    assert str(tmp_path / "no") in line
    assert not (tmp_path / "runs").exists()


def test_a_study_named_for_other_settings(mnist_root, tmp_path):
    """A study keeps the settings it tunes: a rerun with others, under the same --tune.study_name, is refused
    naming the keys that differ (without the name: a study of its own, tests/app/tune/test_trial_life.py)."""
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    given = [f"--data.root={mnist_root}", f"--tune.storage={storage}", "--tune.study_name=mine"]
    settings = tuned(tmp_path, [*given, "--trainer.max_epochs=3"]).settings
    optuna.create_study(study_name="mine", storage=storage).set_user_attr(IDENTITY, settings)
    line = refused(tmp_path, *given, "--model.label_smoothing=0.1")
    assert "study mine" in line and "(model.label_smoothing, trainer.max_epochs differ)" in line
    assert "--tune.study_name" in line
    assert len(optuna.load_study(study_name="mine", storage=storage).trials) == 0


def test_sqlite_asked_to_serve_a_second_machine(mnist_root, tmp_path):
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    # The study made, and a trial that another machine's tune process runs now (its heartbeat fresh).
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(SPACE))
    made = optuna.create_study(study_name="space", storage=storage, direction="maximize")
    made.set_user_attr(IDENTITY, tuned(tmp_path, [f"--data.root={mnist_root}"]).settings)
    running = made.ask()
    storage_ = optuna.storages.RDBStorage(storage)
    trial_id = storage_.get_trial_id_from_study_id_trial_number(
        storage_.get_study_id_from_name("space"), running.number
    )
    for key, value in {
        tune_study.HOST: "node-7",
        tune_study.PID: os.getpid(),
        tune_study.BEAT: time.time(),
    }.items():
        storage_.set_trial_system_attr(trial_id, key, value)
    line = refused(tmp_path, f"--data.root={mnist_root}", f"--tune.storage={storage}")
    assert "node-7" in line and "journal" in line and "postgresql://" in line
