"""W&B, the default logger: offline by itself, one run per job, the CLI config as the run's config,
and a resume that continues the same run. Read back from the offline run files."""

import json
import subprocess

import pytest
import yaml
from helpers.cli import SHRINK, app_command, app_env, check, free_port, run_folder
from helpers.wandb_files import records

NO_LOGGER_FLAG = [arg for arg in SHRINK if not arg.startswith("--trainer.logger")]


def logged_config(run_dir) -> dict:
    config = {}
    for record in records(next(run_dir.glob("run-*.wandb"))):
        if record.WhichOneof("record_type") == "config":
            config.update({item.key: json.loads(item.value_json) for item in record.config.update})
    return config


def fit(cwd, home, *args, launcher=()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in app_env().items() if not k.startswith("WANDB_")}
    env["HOME"] = str(home)  # no ~/.netrc: not logged in
    command = app_command("fit", *NO_LOGGER_FLAG, *args, shrink=False, launcher=launcher)
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_offline_run_holds_the_config_and_a_resume_continues_it(mnist_root, tmp_path):
    result = fit(tmp_path, tmp_path, f"--data.root={mnist_root}")
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
    logged = logged_config(first)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    for key in ("model", "data", "trainer", "seed_everything", "checkpoint"):
        assert logged[key] == saved[key], key
    assert len(logged["git"]["commit"]) == 40

    check(fit(tmp_path, tmp_path, f"--data.root={mnist_root}", "--trainer.max_epochs=2", "--ckpt_path=last"))
    runs = sorted(run.glob("wandb/offline-run-*"))
    assert len(runs) == 2 and all(r.name.endswith(f"-{run_id}") for r in runs)
    assert not (run.parent / "version_1").exists()


@pytest.mark.distributed
@pytest.mark.parametrize("launch", ["ddp", "ddp_spawn", "torchrun"])
def test_one_run_per_job_whatever_the_number_of_ranks(launch, mnist_root, tmp_path):
    args = [f"--data.root={mnist_root}", "--trainer.accelerator=cpu", "--trainer.devices=2"]
    args.append(f"--trainer.strategy={'ddp' if launch == 'torchrun' else launch}")
    launcher = ("-m", "torch.distributed.run", f"--master_port={free_port()}", "--nproc_per_node=2")
    check(fit(tmp_path, tmp_path, *args, launcher=launcher if launch == "torchrun" else ()))
    assert len(list(tmp_path.glob("runs/*/*/wandb/offline-run-*"))) == 1
    assert len(list(tmp_path.glob("runs/*/*"))) == 1
