"""The W&B sweep files (``configs/sweeps/``): valid for W&B's sweep engine, optimising what the module
logs, and the command an agent builds from them trains, in one process and in two DDP ranks.

No W&B service is reached: the suggestions come from ``sweeps`` (W&B's open-source sweep engine),
the command line from wandb's own agent helpers, and the trial logs to an offline W&B run, read back
from its files.
"""

import json
import sys
import warnings

import pytest
import yaml
from helpers.cli import ROOT, SHRINK_WANDB, app_env, callback, check, run_app, run_command, run_folder
from helpers.data_files import write_cifar
from helpers.wandb_files import records

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # sweeps 0.2 declares a pydantic v1 config key at import
    import sweeps

SWEEPS = {p.stem: p for p in sorted((ROOT / "configs" / "sweeps").glob("*.yaml"))}
SWEEP_ID, TRIAL_ID = "swp0test", "trial0test"  # what the agent would put in WANDB_SWEEP_ID, WANDB_RUN_ID


def load(name: str) -> dict:
    return yaml.safe_load(SWEEPS[name].read_text())


def draw(config: dict, runs: tuple = ()) -> dict:
    """The engine's next suggestion, as the agent receives it (JSON): ``{"model.optimizer.lr": {"value":
    0.01}}``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's convergence notes on a tiny history
        suggested = sweeps.next_run(config, list(runs)).config
    return json.loads(json.dumps(suggested, default=lambda number: number.item()))


def agent_command(config: dict, drawn: dict) -> list[str]:
    """The command a W&B agent runs for ``drawn``: the file's ``command`` with its macros filled in
    as ``wandb agent`` fills them (``Agent._command_run``), from the same helpers; only
    ``${interpreter}``, ``python`` there, is this interpreter here."""
    # W&B's modules where they're used: at collection they'd cost every test process a second.
    from wandb.sdk.launch.sweeps import utils as agent_utils

    command = agent_utils.create_sweep_command(list(config["command"]))
    macros = agent_utils.create_sweep_command_args({"args": drawn})
    macros |= {"env": ["/usr/bin/env"], "interpreter": [sys.executable], "program": [config["program"]]}
    line = []
    for part in map(str, command):
        line += macros.get(part[2:-1]) or [] if part.startswith("${") and part.endswith("}") else [part]
    return line


def app_part(line: list[str]) -> list[str]:
    """What follows ``python -m app`` in an agent's command line."""
    assert line[:4] == ["/usr/bin/env", sys.executable, "-m", "app"], line
    return line[4:]


def as_agent(monkeypatch, tmp_path, drawn: dict) -> None:
    """The environment a W&B agent gives the trial it starts (offline here), in a folder with ``configs/``."""
    from wandb.sdk.lib import config_util

    params = tmp_path / "wandb" / f"sweep-{SWEEP_ID}" / f"config-{TRIAL_ID}.yaml"
    config_util.save_config_file_from_dict(str(params), drawn)
    for key, value in {
        "WANDB_SWEEP_ID": SWEEP_ID,
        "WANDB_RUN_ID": TRIAL_ID,
        "WANDB_SWEEP_PARAM_PATH": str(params),
        "WANDB_PROJECT": "lightning-cnn-template",
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
    }.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "configs").symlink_to(ROOT / "configs")  # the agent runs from the project's root


def nested(config: dict, key: str):
    """``config``'s value at a CLI key such as ``data.batch_size`` (through ``init_args``)."""
    for part in key.split("."):
        config = config[part] if part in config else config["init_args"][part]
    return config


def offline_run(run) -> tuple:
    """The one offline W&B run in ``run``'s folder: its run record and every metric name it logged."""
    (folder,) = run.glob("wandb/offline-run-*")
    found = records(next(folder.glob("run-*.wandb")))
    (record,) = [r.run for r in found if r.WhichOneof("record_type") == "run"]
    rows = [r.history for r in found if r.WhichOneof("record_type") == "history"]
    history = {item.key or ".".join(item.nested_key) for row in rows for item in row.item}
    return folder, record, history


@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_file_is_valid_and_its_corners_parse(name, tmp_path):
    config = load(name)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    assert sweeps.schema_violations_from_proposed_config(config) == []
    assert config["method"] in ("bayes", "random")
    # What ImageClassifier logs at each validation; a trial's W&B history holds it (tests below).
    assert config["metric"] == {"name": "val/acc", "goal": "maximize"}
    assert config["early_terminate"]["type"] == "hyperband"
    # Every parameter is a CLI key, and both ends of its range are values the parser takes.
    for end in (0, -1):
        corner = {
            key: {"value": spec["values"][end] if "values" in spec else spec[("min", "max")[end]]}
            for key, spec in config["parameters"].items()
        }
        result = run_app("fit", *app_part(agent_command(config, corner))[1:], "--print_config", cwd=tmp_path)
        check(result)
        printed = yaml.safe_load(result.stdout)
        for key, value in corner.items():
            assert nested(printed, key) == value["value"], key


def test_hyperband_stops_a_trial_that_trails_on_val_acc():
    config = load("mnist")
    first = config["early_terminate"]["min_iter"] + 1  # the engine counts validations from 0
    done, running = sweeps.RunState.finished, sweeps.RunState.running
    # By their wire names: under pydantic 2, sweeps 0.2 drops fields given by their Python names.
    trials = [
        sweeps.SweepRun(name="good", state=done, sampledHistory=[{"val/acc": 0.9}] * first),
        sweeps.SweepRun(name="weak", state=running, sampledHistory=[{"val/acc": 0.2}] * first),
        sweeps.SweepRun(name="young", state=running, sampledHistory=[{"val/acc": 0.1}] * (first - 1)),
    ]
    assert [run.name for run in sweeps.stop_runs(config, trials)] == ["weak"]


def test_a_trial_is_the_agents_run_and_trains_with_the_drawn_values(mnist_root, tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    config = load("mnist")
    drawn = draw(config)
    as_agent(monkeypatch, tmp_path, drawn)
    wandb.teardown()  # wandb reads its environment once per process: forget an earlier test's
    line = agent_command(config, drawn)
    args = [*app_part(line)[1:], *SHRINK_WANDB, f"--data.root={mnist_root}", "--test_after_fit=false"]
    try:
        result = run_app("fit", *args, shrink=False, cwd=tmp_path)
    finally:
        wandb.teardown()
    check(result)
    assert f"W&B sweep {SWEEP_ID}: this run is the agent's trial {TRIAL_ID}" in result.stderr
    run = run_folder(tmp_path)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    for key, value in drawn.items():
        assert nested(saved, key) == value["value"], key
    assert (run / "wandb-id").read_text().strip() == TRIAL_ID
    folder, record, history = offline_run(run)
    assert folder.name.endswith(f"-{TRIAL_ID}")
    assert (record.run_id, record.sweep_id, record.run_group) == (TRIAL_ID, SWEEP_ID, f"sweep-{SWEEP_ID}")
    assert record.display_name != f"{run.parent.name}/{run.name}"  # the sweep names its trials
    assert config["metric"]["name"] in history
    # The parameters the sweep's controller reads back are the values the trial trained with.
    controller_sees = {item.key: json.loads(item.value_json) for item in record.config.update}
    assert {key: controller_sees[key] for key in drawn} == {key: nested(saved, key) for key in drawn}
    assert "Ignoring" not in result.stderr  # wandb's notes on init arguments a sweep overrides


@pytest.mark.full
@pytest.mark.distributed
def test_every_ddp_rank_of_a_trial_gets_the_drawn_values(tmp_path, monkeypatch):
    config = load("cifar10_resnet_ddp")
    first = draw(config)
    earlier = sweeps.SweepRun(
        name="earlier", state=sweeps.RunState.finished, config=first, summaryMetrics={"val/acc": 0.3}
    )
    drawn = draw(config, (earlier,))
    as_agent(monkeypatch, tmp_path, drawn)
    # Room for the largest per-device batch on each of the 2 ranks.
    data = write_cifar(tmp_path / "data", n_train=1200, n_test=100)
    line = agent_command(config, drawn)
    cpu2 = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]
    line += [*cpu2, *SHRINK_WANDB, "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1"]
    line.append("--model.net.depth=8")  # ResNet-8: the same network code, fewer blocks
    line += [f"--data.root={data}", "--data.verify=false", "--test_after_fit=false"]
    line.append(callback("helpers.recipe_probe.RecipeProbe", folder=str(tmp_path / "probe")))
    env = {**app_env(), "HOME": str(tmp_path)}
    done = run_command(line, cwd=tmp_path, env=env)
    check(done)
    values = {key: spec["value"] for key, spec in drawn.items()}
    for rank in (0, 1):
        seen = json.loads((tmp_path / "probe" / f"rank{rank}.json").read_text())
        assert seen["world_size"] == 2
        assert seen["optimizer"]["initial_lr"] == pytest.approx(2 * values["model.optimizer.lr"])  # linear
        assert seen["optimizer"]["weight_decay"] == values["model.optimizer.weight_decay"]
        assert seen["warmup_ratio"] == values["model.scheduler.warmup_ratio"]
        assert seen["batch_size"] == values["data.batch_size"]
    run = run_folder(tmp_path)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert {key: nested(saved, key) for key in values} == values
    (folder,) = tmp_path.glob("runs/*/*/wandb/offline-run-*")  # one W&B run for the two ranks
    assert folder.name.endswith(f"-{TRIAL_ID}")
