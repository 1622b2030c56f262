"""W&B, the default logger: offline by itself, the CLI config as the run's config, and a resume that
continues the same run. Read back from the offline run files. Its options parse without importing
wandb, which a command imports only when its run starts.

One W&B run per job whatever the number of ranks is checked on the 2-process runs of
``tests/app/distributed/test_distributed.py``, which log to W&B.
"""

import inspect
import json
import os
import sys
from importlib.metadata import version

import pytest
import yaml
from helpers.cli import (
    SHRINK_WANDB,
    app_env,
    check,
    run_app,
    run_command,
    run_folder,
    run_process,
    wandb_offline_env,
)
from helpers.wandb_files import records

from data import MNISTDataModule


def logged_config(run_dir) -> dict:
    config = {}
    for record in records(next(run_dir.glob("run-*.wandb"))):
        if record.WhichOneof("record_type") == "config":
            config.update({item.key: json.loads(item.value_json) for item in record.config.update})
    return config


# Options users give W&B's run, as the command line spells them.
WANDB_OPTIONS = {
    "project": "mine",
    "entity": "team",
    "group": "ablation",
    "job_type": "train",
    "notes": "lr sweep",
    "tags": ["baseline", "sgd"],
}


def wandb_flags() -> list[str]:
    flags = [f"--trainer.logger.{k}={v}" for k, v in WANDB_OPTIONS.items() if not isinstance(v, list)]
    return flags + [f"--trainer.logger.tags+={tag}" for tag in WANDB_OPTIONS["tags"]]


def fit(cwd, *args):
    """``fit`` as on a machine not logged in to W&B (no ``WANDB_*``, no ``~/.netrc``). A process of
    its own: the run's records are complete when it exits."""
    return run_process("fit", *SHRINK_WANDB, *args, shrink=False, env=wandb_offline_env(cwd), cwd=cwd)


def imported_modules(stderr: str) -> set[str]:
    """The modules a process run with ``python -X importtime`` imported, from its stderr."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_help_and_print_config_start_without_importing_wandb(tmp_path):
    """The default logger's options are read from its own signature: wandb is imported when a run
    starts, not by ``--help`` nor ``--print_config``, which still take its options."""
    printed = {}
    for flags in (["--help"], [*wandb_flags(), "--print_config"]):
        command = [sys.executable, "-X", "importtime", "-m", "app", "fit", *flags]
        result = run_command(command, cwd=tmp_path, env=app_env())
        check(result)
        imported = imported_modules(result.stderr)
        assert {"lightning", "jsonargparse", "app.wandb_logger.logger"} <= imported
        assert not [name for name in imported if name.split(".")[0] == "wandb"], flags[-1]
        printed[flags[-1]] = result.stdout
    assert "--trainer.logger.help" in printed["--help"]
    logger = yaml.safe_load(printed["--print_config"])["trainer"]["logger"]
    assert logger["class_path"] == "app.wandb_logger.WandbLogger"
    assert {k: logger["init_args"][k] for k in WANDB_OPTIONS} == WANDB_OPTIONS


def test_a_config_naming_every_option_of_lightnings_logger_and_wandb_init_loads(tmp_path):
    """The logger takes the options of Lightning's W&B logger and of ``wandb.init``: a run's
    ``config.yaml`` that names them all (as every run recorded them) still loads, and names no other."""
    wandb = pytest.importorskip("wandb")
    from lightning.pytorch.loggers import WandbLogger

    options = {}
    for function in (WandbLogger, wandb.init):
        for name, parameter in inspect.signature(function).parameters.items():
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                plain = isinstance(parameter.default, str | bool | None)  # wandb's "not set" is an object
                options.setdefault(name, parameter.default if plain else None)
    config = tmp_path / "config.yaml"
    logger = {"class_path": "app.wandb_logger.WandbLogger", "init_args": options}
    config.write_text(yaml.safe_dump({"trainer": {"logger": logger}}))
    result = run_app("fit", f"--config={config}", "--print_config", shrink=False, cwd=tmp_path)
    check(result)
    assert yaml.safe_load(result.stdout)["trainer"]["logger"]["init_args"] == options


@pytest.mark.full
def test_offline_run_holds_the_config_and_a_resume_continues_it(mnist_root, tmp_path, monkeypatch):
    result = fit(tmp_path, f"--data.root={mnist_root}", *wandb_flags())
    check(result)
    run = run_folder(tmp_path)
    where = run.relative_to(tmp_path)
    assert (
        f"W&B offline (not logged in): the run is kept in {where}/wandb; "
        f"upload it later with: wandb sync {where}/wandb/offline-run-*"
    ) in result.stderr
    (first,) = run.glob("wandb/offline-run-*")
    run_id = (run / "wandb-id").read_text().strip()
    assert first.name.endswith(f"-{run_id}")
    found = records(next(first.glob("run-*.wandb")))
    (record,) = [r.run for r in found if r.WhichOneof("record_type") == "run"]
    given = {"project": record.project, "entity": record.entity, "group": record.run_group}
    given |= {"job_type": record.job_type, "notes": record.notes, "tags": list(record.tags)}
    assert given == WANDB_OPTIONS
    logged = logged_config(first)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    for key in ("model", "data", "trainer", "seed_everything", "checkpoint"):
        assert logged[key] == saved[key], key
    assert len(logged["git"]["commit"]) == 40
    assert logged["versions"]["torch"] == version("torch")
    assert logged["data_fingerprint"] == MNISTDataModule(root=str(mnist_root)).fingerprint()

    # The resume in this process: only its run's folder name is read, not its records.
    for key in [key for key in os.environ if key.startswith("WANDB_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    args = [*SHRINK_WANDB, f"--data.root={mnist_root}", "--trainer.max_epochs=2", "--ckpt_path=last"]
    check(run_app("fit", *args, shrink=False, cwd=tmp_path))
    runs = sorted(run.glob("wandb/offline-run-*"))
    assert len(runs) == 2 and all(r.name.endswith(f"-{run_id}") for r in runs)
    assert not (run.parent / "version_1").exists()


def test_a_value_refused_when_the_classes_are_built_leaves_no_wandb_line(tmp_path, monkeypatch):
    # The line names the run folder, which a command that fails before training removes.
    monkeypatch.setenv("WANDB_MODE", "offline")
    args = [*SHRINK_WANDB, "--model.net=ResNet", "--model.net.depth=10"]
    result = run_app("fit", *args, shrink=False, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: ResNet depth must be 6n + 2")
    assert "W&B offline" not in result.stderr
    assert not list(tmp_path.glob("runs/*/version_*"))
