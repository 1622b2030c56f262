"""Two tune processes on one study (a real PostgreSQL server; a journal file; SQLite) finish exactly the
trials asked for, each process some, none run twice nor drawing the same values. On PostgreSQL one of
them is SIGKILLed mid-trial: the same command run again resumes that trial from its own ``last.ckpt`` and
it ends with exactly the weights an uninterrupted fit with its values has. The kill is the storages' alike
(the trial's marks go through Optuna's storage API), so SQLite and the journal show the sharing alone."""

import csv
import multiprocessing
import os
import signal
import subprocess
import time
import traceback
from pathlib import Path

import pytest
import torch
import yaml
from helpers.cli import SHRINK, app_command, app_env, check, max_difference, run_app, run_folder

from app.tune.report import lines
from app.tune.study import PID, open_storage

pytestmark = pytest.mark.distributed

FIT = [*SHRINK, "--trainer.max_epochs=2", "--last_checkpoint.every_n_steps=1"]
TRIALS = {"postgresql": 4, "journal": 2, "sqlite": 2}  # a trial each where no process is killed


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def trial_of(pid: int) -> str | None:
    """The ``--name`` of the trial the tune process ``pid`` runs now."""
    for child in children(pid):
        try:
            args = (Path("/proc") / str(child) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        names = [a.decode().split("=", 1)[1] for a in args if a.startswith(b"--name=")]
        if names:
            return names[0]
    return None


def kill_mid_trial(tune: subprocess.Popen, folder: Path) -> str:
    """SIGKILL ``tune`` while its trial's fit waits for the answer to a validation; returns the trial's run.

    Looked at while the tune process is stopped (SIGSTOP), so that it answers nothing meanwhile: a fit
    whose report is unanswered cannot end before the kill (its trial stays RUNNING in the study)."""
    deadline = time.monotonic() + 300
    while True:
        assert time.monotonic() < deadline and tune.poll() is None, "the first tune process ended early"
        tune.send_signal(signal.SIGSTOP)
        running = trial_of(tune.pid)
        if running:
            channel = folder / ".channels" / running
            while not lines(channel / "reports.jsonl") and time.monotonic() < deadline:
                time.sleep(0.05)  # its fit trains on to its first validation, and waits there
            if len(lines(channel / "reports.jsonl")) > len(lines(channel / "verdicts")):
                tune.send_signal(signal.SIGKILL)
                tune.wait()
                return running
        tune.send_signal(signal.SIGCONT)
        time.sleep(0.05)


@pytest.mark.full
@pytest.mark.parametrize("kind", ["postgresql", "journal", "sqlite"])
def test_two_tune_processes_share_a_study_and_a_killed_trial_resumes_exactly(
    kind, request, mnist_root, tmp_path
):
    trials, killing = TRIALS[kind], kind == "postgresql"
    storage = {
        "postgresql": lambda: request.getfixturevalue("postgres").url,
        "journal": lambda: str(tmp_path / "study.log"),
        "sqlite": lambda: None,  # the default: ROOT/tune/NAME/study.db
    }[kind]()
    space = tmp_path / "space.yaml"
    parameters = {"model.optimizer.lr": {"distribution": "log_uniform_values", "min": 0.005, "max": 0.05}}
    space.write_text(
        yaml.safe_dump(
            {"method": "random", "metric": {"name": "val/acc", "goal": "maximize"}, "parameters": parameters}
        )
    )
    name = f"shared-{kind}"
    tune = app_command(
        "tune",
        f"--data.root={mnist_root}",
        f"--tune.space={space}",
        f"--tune.trials={trials}",
        *([f"--tune.storage={storage}"] if storage else []),
        f"--tune.study_name={name}",
        "--trainer.max_epochs=2",
        "--last_checkpoint.every_n_steps=1",
    )
    start = lambda: subprocess.Popen(tune, cwd=tmp_path, env=app_env(), stderr=subprocess.PIPE, text=True)  # noqa: E731
    first, second = start(), start()
    folder = tmp_path / "runs" / "tune" / name
    running = [first, second]
    if killing:
        killed = kill_mid_trial(first, folder)
        running[0] = start()  # the same command, run again
    for process in running:
        assert process.wait(timeout=600) == 0, process.stderr.read()[-3000:]

    import optuna

    optuna_storage = {
        "postgresql": lambda: storage,
        "journal": lambda: optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(storage)
        ),
        "sqlite": lambda: f"sqlite:///{folder / 'study.db'}",
    }[kind]()
    made = optuna.load_study(study_name=name, storage=optuna_storage).trials
    complete = [t for t in made if t.state.name == "COMPLETE"]
    # Exactly the count asked for, each run (folder) once: the killed trial failed, then resumed once.
    assert len(complete) == trials and len({t.user_attrs["run"] for t in complete}) == trials
    # Both processes ran trials: each marks its trials with its pid (the killed one's too).
    assert {t.system_attrs[PID] for t in made} >= {first.pid, second.pid}
    # Every draw its own: each process seeds a trial's draws with its number (the same --seed_everything).
    drawn = [t.params["model.optimizer.lr"] for t in made if "resumes" not in t.user_attrs]
    assert len(set(drawn)) == len(drawn) >= trials, drawn
    rows = list(csv.DictReader((folder / "trials.csv").open()))
    assert len(rows) == len(made)
    if not killing:
        assert [t.state.name for t in made] == ["COMPLETE"] * trials
        return
    (interrupted,) = [t for t in made if t.state.name == "FAIL"]
    assert interrupted.user_attrs["run"] == killed and not [
        t for t in made if t.state.name not in ("COMPLETE", "FAIL")
    ]
    (resumed,) = [t for t in complete if t.user_attrs.get("resumes") == interrupted.number]
    assert resumed.params == interrupted.params and resumed.user_attrs["run"] == killed
    assert not list((folder / killed).glob("version_1"))  # resumed in its own run folder, not started anew
    assert "--ckpt_path last: resuming from" in (folder / killed / "output.log").read_text()

    # The resumed trial's weights are those of one uninterrupted fit with its values.
    lr = resumed.params["model.optimizer.lr"]
    check(
        run_app(
            "fit",
            f"--data.root={mnist_root}",
            *FIT[len(SHRINK) :],
            f"--model.optimizer.lr={lr}",
            cwd=tmp_path / "plain",
        )
    )
    plain = torch.load(run_folder(tmp_path / "plain") / "checkpoints" / "last.ckpt", weights_only=False)
    tuned = torch.load(folder / killed / "version_0" / "checkpoints" / "last.ckpt", weights_only=False)
    assert tuned["global_step"] == plain["global_step"] == 8
    assert max_difference(tuned["state_dict"], plain["state_dict"]) == 0


@pytest.mark.full
def test_a_trial_whose_machine_went_silent_is_taken_over(postgres, mnist_root, tmp_path):
    """A RUNNING trial of another machine whose heartbeat stays silent for longer than the grace period
    (by the watching process's clock): its machine is taken for dead, and a tune process anywhere runs the
    trial again with its values."""
    import optuna

    from app.tune import study as tune_study
    from app.tune.identity import IDENTITY
    from app.tune.search import Tune

    space = tmp_path / "space.yaml"
    space.write_text(
        yaml.safe_dump(
            {
                "metric": {"name": "val/acc", "goal": "maximize"},
                "parameters": {"model.optimizer.lr": {"values": [0.02, 0.03]}},
            }
        )
    )
    made = optuna.create_study(study_name="silent", storage=postgres.url, direction="maximize")
    fit_args = [*SHRINK, f"--data.root={mnist_root}"]
    made.set_user_attr(IDENTITY, Tune([f"--tune.space={space}", *fit_args]).settings)
    lost = made.ask({"model.optimizer.lr": optuna.distributions.CategoricalDistribution([0.02, 0.03])})
    lost.set_user_attr(tune_study.RUN, "trial-000")
    storage = optuna.storages.RDBStorage(postgres.url)
    trial_id = storage.get_trial_id_from_study_id_trial_number(
        storage.get_study_id_from_name("silent"), lost.number
    )
    for key, value in {tune_study.HOST: "node-7", tune_study.PID: 1, tune_study.BEAT: 12345.0}.items():
        storage.set_trial_system_attr(trial_id, key, value)
    result = run_app(
        "tune",
        f"--data.root={mnist_root}",
        f"--tune.space={space}",
        "--tune.trials=1",
        f"--tune.storage={postgres.url}",
        "--tune.study_name=silent",
        cwd=tmp_path,
    )
    check(result)
    first, again = optuna.load_study(study_name="silent", storage=postgres.url).trials
    assert (first.state.name, again.state.name) == ("FAIL", "COMPLETE")
    assert (
        again.params == lost.params
        and again.user_attrs["resumes"] == 0
        and again.user_attrs["run"] == "trial-000"
    )
    assert "(resumes trial 0)" in result.stderr
    # Its run folder was on node-7: said in one line, and the trial trains from the start here.
    assert "tune: trial 1 resumes trial 0, whose run folder " in result.stderr
    assert "this machine does not see: it trains from the start" in result.stderr


def open_in_a_process(url: str, errors: Path) -> None:
    """A forked process's open of ``url``; what it raised in ``errors``, and a non-zero exit."""
    try:
        open_storage(url, None)
    except BaseException:
        errors.write_text(traceback.format_exc())
        os._exit(1)
    os._exit(0)


@pytest.mark.full
def test_tune_processes_that_open_a_new_database_at_once_all_open_it(postgres, tmp_path):
    """Each creates its tables if missing, so several at once collide in PostgreSQL (optuna issue 1092).
    The processes are forks of this one: the race is theirs, the import of the libraries this one's."""
    url = postgres.new_database("opened_at_once")
    fork = multiprocessing.get_context("fork")
    processes = [fork.Process(target=open_in_a_process, args=(url, tmp_path / f"{n}.err")) for n in range(6)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    errors = "\n".join(path.read_text() for path in sorted(tmp_path.glob("*.err")))
    assert [p.exitcode for p in processes] == [0] * 6, errors[-3000:]
