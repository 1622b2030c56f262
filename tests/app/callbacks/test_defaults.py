"""What the Trainer runs is what the config shows; a user's list changes it; the guarantees stay."""

import importlib
import importlib.util
import json

import pytest
import torch
import yaml
from helpers.cli import callback, check, run_app, run_folder

TWO_EPOCHS = ["--trainer.max_epochs=2", "--data.batch_size=64", "--test_after_fit=false"]


def printed(tmp_path, *args) -> dict:
    result = run_app("fit", "--print_config", *args, shrink=False, cwd=tmp_path)
    check(result)
    return yaml.safe_load(result.stdout)


def test_print_config_lists_every_callback_plugin_and_profiler_the_trainer_runs(mnist_root, tmp_path):
    config = printed(tmp_path)
    listed = [c["class_path"] for c in config["trainer"]["callbacks"]]
    plugins = [p["class_path"] for p in config["trainer"]["plugins"]]
    # Always on, each with its own settings: the best-k checkpoints, last.ckpt, the NaN stop.
    assert {"checkpoint", "last_checkpoint"} <= config.keys()
    assert ("nan_stop" in config) == (importlib.util.find_spec("app.nan_stop") is not None)
    run = run_app(
        "fit",
        f"--data.root={mnist_root}",
        "--trainer.enable_progress_bar=true",
        "--trainer.enable_model_summary=true",
        callback("helpers.trainer_probe.TrainerProbe", file=str(tmp_path / "ran.json")),
        cwd=tmp_path,
    )
    check(run)
    ran = json.loads((tmp_path / "ran.json").read_text())
    forced = {
        "lightning.pytorch.callbacks.model_checkpoint.ModelCheckpoint",
        "app.callbacks.last_checkpoint.LastCheckpoint",
        "app.runs.config.RunConfig",  # RUN/config.yaml itself
        # trainer.enable_model_summary's: Lightning's Rich one, as the progress bar is Rich.
        "lightning.pytorch.callbacks.rich_model_summary.RichModelSummary",
        "helpers.trainer_probe.TrainerProbe",
    }
    if "nan_stop" in config:  # the NaN stop part's
        forced.add("app.nan_stop.StopOnNonFiniteWeights")
    if not any("app.progress_bar" in path for path in listed):  # without that part, Lightning's own bar
        forced.add("lightning.pytorch.callbacks.progress.rich_progress.RichProgressBar")
    assert set(ran["callbacks"]) == {qualified(path) for path in listed} | forced
    assert ran["checkpoint_io"] in plugins
    assert ran["profiler"] == config["trainer"]["profiler"]["class_path"]
    saved = yaml.safe_load((run_folder(tmp_path) / "config.yaml").read_text())
    assert [c["class_path"] for c in saved["trainer"]["callbacks"]][: len(listed)] == listed


def qualified(class_path: str) -> str:
    """``module.Class`` of the class that ``class_path`` (perhaps a package's re-export) names."""
    module, _, name = class_path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    return f"{cls.__module__}.{cls.__qualname__}"


def test_a_yaml_list_removes_a_default_callback(mnist_root, tmp_path):
    config = printed(tmp_path)
    mine = [c for c in config["trainer"]["callbacks"] if "app.pictures" not in c["class_path"]]
    path = tmp_path / "no_pictures.yaml"
    path.write_text(yaml.safe_dump({"trainer": {"callbacks": mine}}))
    assert "app.pictures" not in json.dumps(printed(tmp_path, f"--config={path}")["trainer"])
    check(run_app("fit", f"--config={path}", f"--data.root={mnist_root}", cwd=tmp_path))
    assert not (run_folder(tmp_path) / "plots").exists()


@pytest.mark.part("app.nan_stop")
def test_the_nan_stop_holds_whatever_the_users_list(mnist_root, tmp_path):
    """The user's list has none of ours: the NaN stop is not in it, and still no bad step is saved."""
    nan = [{"class_path": "helpers.stops.NanAt", "init_args": {"step": 3}}]
    args = [*TWO_EPOCHS, f"--data.root={mnist_root}", "--last_checkpoint.every_n_steps=2"]
    result = run_app("fit", *args, f"--trainer.callbacks={json.dumps(nan)}", cwd=tmp_path)
    assert result.returncode == 1
    assert "error: the weights are not finite at step 4 (finite at step 2)" in result.stderr
    last = run_folder(tmp_path) / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 2


def test_sigterm_saves_last_ckpt_whatever_the_users_list(mnist_root, tmp_path):
    term = [{"class_path": "helpers.stops.SigtermAt", "init_args": {"step": 5}}]
    args = [*TWO_EPOCHS, f"--data.root={mnist_root}", "--last_checkpoint.every_n_steps=0"]
    result = run_app("fit", *args, f"--trainer.callbacks={json.dumps(term)}", cwd=tmp_path)
    assert result.returncode == 143, result.stderr[-2000:]
    last = run_folder(tmp_path) / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 5


@pytest.mark.part("app.progress_bar")  # the callback the progress-bar flag names
def test_a_flag_that_turns_a_feature_off_names_the_callbacks_it_turns_off(mnist_root, tmp_path):
    result = run_app("fit", f"--data.root={mnist_root}", "--trainer.enable_checkpointing=false", cwd=tmp_path)
    check(result)
    for line in (
        "--trainer.enable_progress_bar false turns off ThrottledRichProgressBar",
        "--trainer.enable_checkpointing false turns off ModelCheckpoint, LastCheckpoint",
    ):
        assert line in result.stderr
