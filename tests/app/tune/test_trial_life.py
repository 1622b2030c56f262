"""A trial's life across what goes wrong around it, on the real CLI and real storages: its tune process
SIGKILLed after the verdict to prune it, its database restarting, the same command rerun with other fit
settings."""

import signal
import subprocess
import time

import optuna
import pytest
import torch
import yaml
from helpers.cli import app_command, app_env, check, run_app

pytestmark = [pytest.mark.distributed, pytest.mark.full]  # its trials are processes, several per test

PRUNE_ALL = '{"class_path": "optuna.pruners.ThresholdPruner", "init_args": {"lower": 2.0}}'  # val/acc < 2


def space_file(tmp_path, parameters: dict) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(
        yaml.safe_dump({"metric": {"name": "val/acc", "goal": "maximize"}, "parameters": parameters})
    )
    return f"--tune.space={path}"


def test_a_pruned_trial_stays_pruned_when_its_tune_process_is_killed_before_telling(mnist_root, tmp_path):
    args = [
        f"--data.root={mnist_root}",
        space_file(tmp_path, {"model.optimizer.lr": {"values": [0.01, 0.02]}}),
        "--tune.trials=1",
        f"--tune.pruner={PRUNE_ALL}",
        "--trainer.max_epochs=3",
        "--last_checkpoint.every_n_steps=1",
    ]
    tune = subprocess.Popen(app_command("tune", *args), cwd=tmp_path, env=app_env(), stderr=subprocess.PIPE)
    folder = tmp_path / "runs" / "tune" / "space"
    verdicts = folder / ".channels" / "trial-000" / "verdicts"
    deadline = time.monotonic() + 300
    # SIGKILL once the verdict is written: the fit stops (after 1 of 3 epochs), Optuna is not yet told.
    while not (verdicts.is_file() and "prune" in verdicts.read_text()):
        assert tune.poll() is None and time.monotonic() < deadline, "the tune process ended early"
        time.sleep(0.01)
    tune.send_signal(signal.SIGKILL)
    tune.wait()
    (trial,) = optuna.load_study(study_name="space", storage=f"sqlite:///{folder / 'study.db'}").trials
    assert trial.state.name == "RUNNING"

    again = run_app("tune", *args, cwd=tmp_path)  # the same command
    check(again)
    assert "trial 1 [1/1] lr=0.01: pruned after 1 validation(s)" in again.stderr
    assert "(resumes trial 0)" in again.stderr
    log = (folder / "trial-000" / "output.log").read_text()
    assert "--ckpt_path last: resuming from" not in log  # never trained further
    last = torch.load(folder / "trial-000" / "version_0" / "checkpoints" / "last.ckpt", weights_only=False)
    assert last["global_step"] == 4  # the first epoch's 4 steps
    states = [
        t.state.name
        for t in optuna.load_study(study_name="space", storage=f"sqlite:///{folder / 'study.db'}").trials
    ]
    assert states == ["FAIL", "PRUNED"]


def test_a_rerun_with_other_fit_settings_is_a_study_of_its_own(mnist_root, tmp_path):
    args = [
        f"--data.root={mnist_root}",
        space_file(tmp_path, {"model.optimizer.lr": {"values": [0.01, 0.02]}}),
        "--tune.trials=1",
    ]
    first = run_app("tune", *args, cwd=tmp_path)
    check(first)
    other = run_app("tune", *args, "--trainer.max_epochs=2", cwd=tmp_path)
    check(other)
    said = [line for line in other.stderr.splitlines() if "tunes other settings" in line]
    assert len(said) == 1 and said[0].startswith(
        "tune: the study space tunes other settings (trainer.max_epochs differs): this is study space-"
    )
    derived = said[0].rsplit(" ", 1)[1]
    # Its own trial, run with its own settings (not the first study's result reported).
    assert "trial 0 [1/1] lr=0.01: val/acc" in other.stderr
    config = yaml.safe_load(
        (tmp_path / "runs" / "tune" / derived / "trial-000" / "version_0" / "config.yaml").read_text()
    )
    assert config["trainer"]["max_epochs"] == 2
    # The same settings again: the derived study, whole already.
    same = run_app("tune", *args, "--trainer.max_epochs=2", cwd=tmp_path)
    check(same)
    assert f"this is study {derived}" in same.stderr and "trial 0 [" not in same.stderr


def test_the_database_restarting_under_a_running_study(mnist_root, tmp_path):
    from helpers.postgres import PostgresServer

    server = PostgresServer()
    try:
        parameters = {"model.optimizer.lr": {"distribution": "log_uniform_values", "min": 0.005, "max": 0.05}}
        args = [
            f"--data.root={mnist_root}",
            space_file(tmp_path, parameters),
            "--tune.trials=2",
            f"--tune.storage={server.url}",
            "--trainer.max_epochs=2",
        ]
        tune = subprocess.Popen(
            app_command("tune", *args), cwd=tmp_path, env=app_env(), stderr=subprocess.PIPE, text=True
        )
        reports = tmp_path / "runs" / "tune" / "space" / ".channels" / "trial-000" / "reports.jsonl"
        deadline = time.monotonic() + 300
        while not reports.is_file():  # a trial running, relaying its first validation
            assert tune.poll() is None and time.monotonic() < deadline, "the tune process ended early"
            time.sleep(0.05)
        server.halt()
        time.sleep(5)
        server.start()
        _, stderr = tune.communicate(timeout=600)
        assert tune.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
        trials = optuna.load_study(study_name="space", storage=server.url).trials
        assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]
    finally:
        server.stop()


def test_a_trial_taken_over_while_it_runs_ends_there_in_one_line(mnist_root, tmp_path):
    """Another process took the trial over (its heartbeat seemed late): the fit here stops, one line says
    so, and the study goes on (here this process itself resumes the trial, queued again)."""
    from app.tune.study import requeue

    args = [
        f"--data.root={mnist_root}",
        space_file(tmp_path, {"model.optimizer.lr": {"values": [0.01, 0.02]}}),
        "--tune.trials=1",
        "--trainer.max_epochs=3",
        "--last_checkpoint.every_n_steps=1",
    ]
    tune = subprocess.Popen(
        app_command("tune", *args), cwd=tmp_path, env=app_env(), stderr=subprocess.PIPE, text=True
    )
    folder = tmp_path / "runs" / "tune" / "space"
    reports = folder / ".channels" / "trial-000" / "reports.jsonl"
    deadline = time.monotonic() + 300
    while not reports.is_file():
        assert tune.poll() is None and time.monotonic() < deadline, "the tune process ended early"
        time.sleep(0.05)
    url = f"sqlite:///{folder / 'study.db'}"
    study = optuna.load_study(study_name="space", storage=url)
    requeue(study, optuna.storages.RDBStorage(url), study.trials[0], "taken over")
    _, stderr = tune.communicate(timeout=600)
    assert tune.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    said = [line for line in stderr.splitlines() if "taken over" in line]
    assert len(said) == 1 and said[0].startswith("trial 0: taken over by another tune process"), said
    trials = optuna.load_study(study_name="space", storage=url).trials
    assert [(t.state.name, t.user_attrs.get("resumes")) for t in trials] == [("FAIL", None), ("COMPLETE", 0)]


@pytest.mark.slow  # the database stays down past the grace period: over a minute
def test_a_database_down_past_the_grace_period_ends_the_process_in_one_line(mnist_root, tmp_path):
    from helpers.postgres import PostgresServer

    server = PostgresServer()
    try:
        args = [
            f"--data.root={mnist_root}",
            space_file(tmp_path, {"model.optimizer.lr": {"min": 0.005, "max": 0.05}}),
            "--tune.trials=1",
            f"--tune.storage={server.url}",
            "--trainer.max_epochs=3",
            "--last_checkpoint.every_n_steps=1",
        ]
        tune = subprocess.Popen(
            app_command("tune", *args), cwd=tmp_path, env=app_env(), stderr=subprocess.PIPE, text=True
        )
        reports = tmp_path / "runs" / "tune" / "space" / ".channels" / "trial-000" / "reports.jsonl"
        deadline = time.monotonic() + 300
        while not reports.is_file():  # the fit waits for the answer to its first validation
            assert tune.poll() is None and time.monotonic() < deadline, "the tune process ended early"
            time.sleep(0.05)
        server.halt()
        _, stderr = tune.communicate(timeout=600)
        lines = stderr.strip().splitlines()
        assert tune.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
        assert lines[-1].startswith("error: the study's storage ") and "did not answer for 60 s" in lines[-1]
        server.start()
        again = run_app("tune", *args, cwd=tmp_path)  # the same command, the database back
        check(again)
        assert "trial 1 [1/1] lr=0.01: val/acc" in again.stderr and "(resumes trial 0)" in again.stderr
    finally:
        server.stop()
