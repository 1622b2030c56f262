"""The logger the config names is the one that runs: ours by their own names, Lightning's by theirs."""

import pytest
import yaml
from helpers.cli import check, run_app, run_folder


def test_print_config_names_the_logger_class_that_runs(tmp_path):
    shown = {}
    for name in ("CSVLogger", "AppendingCSVLogger"):
        result = run_app("fit", f"--trainer.logger={name}", "--print_config", cwd=tmp_path)
        check(result)
        shown[name] = yaml.safe_load(result.stdout)["trainer"]["logger"]["class_path"]
    assert shown == {
        "CSVLogger": "lightning.pytorch.loggers.CSVLogger",
        "AppendingCSVLogger": "app.runs.csv_logger.AppendingCSVLogger",
    }


def test_lightnings_csv_logger_starts_metrics_afresh_on_resume(mnist_root, tmp_path):
    args = [f"--data.root={mnist_root}", "--test_after_fit=false", "--trainer.logger=CSVLogger"]
    check(run_app("fit", *args, cwd=tmp_path))
    run = run_folder(tmp_path)
    assert yaml.safe_load((run / "config.yaml").read_text())["trainer"]["logger"]["class_path"] == (
        "lightning.pytorch.loggers.CSVLogger"
    )
    before = (run / "metrics.csv").read_text().splitlines()
    resumed = run_app("fit", *args, "--trainer.max_epochs=2", "--ckpt_path=last", cwd=tmp_path)
    check(resumed)
    after = (run / "metrics.csv").read_text().splitlines()
    assert not set(before[1:]) & set(after[1:])  # the first run's rows are gone


@pytest.mark.parametrize("logger", ["TensorBoardLogger", "helpers.json_logger.JsonLinesLogger"])
def test_any_logger_with_a_save_dir_writes_into_the_run_folder(logger, mnist_root, tmp_path):
    """Lightning's, and one of the user's own that no list in the app names."""
    check(run_app("fit", f"--data.root={mnist_root}", f"--trainer.logger={logger}", cwd=tmp_path))
    run = run_folder(tmp_path)
    written = (
        list(run.glob("events.out.tfevents.*")) if logger == "TensorBoardLogger" else [run / "metrics.jsonl"]
    )
    assert written and all(path.is_file() for path in written)
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]  # nothing beside the run folder
