"""A search from start to end on the real CLI, real trials (``python -m app fit`` processes) and a real
SQLite study: the study folder (trials.csv, best.yaml, plots), a failing trial marked FAILED with its
line, ``fit --config best.yaml`` reproducing the best trial, and the study read through optuna-dashboard."""

import csv
import json
import threading
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
import yaml
from helpers.cli import check, logged, run_app, run_folder

pytestmark = pytest.mark.distributed  # its trials are processes


class Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.mark.full
def test_a_search_leaves_a_study_folder_people_can_read(mnist_root, tmp_path):
    space = tmp_path / "space.yaml"
    # A grid: its points are the trials, in order; 1e12 makes the loss diverge (the NaN stop: a failure).
    parameters = {"model.optimizer.lr": {"values": [0.01, 0.2, 1.0e12]}, "data.batch_size": {"value": 32}}
    space.write_text(
        yaml.safe_dump(
            {"method": "grid", "metric": {"name": "val/acc", "goal": "maximize"}, "parameters": parameters}
        )
    )
    result = run_app("tune", f"--data.root={mnist_root}", f"--tune.space={space}", cwd=tmp_path)
    check(result)
    folder = tmp_path / "runs" / "tune" / "space"
    rows = list(csv.DictReader((folder / "trials.csv").open()))
    assert [(r["number"], r["state"], float(r["model.optimizer.lr"])) for r in rows] == [
        ("0", "COMPLETE", 0.01),
        ("1", "COMPLETE", 0.2),
        ("2", "FAIL", 1e12),
    ]
    assert "loss" in rows[2]["error"] and rows[2]["value"] == ""
    # One line per trial as it ends, with its values and result.
    lines = result.stderr.splitlines()
    started = [line for line in lines if line.startswith("trial ") and ": started, log " in line]
    assert started[0] == "trial 0 lr=0.01: started, log runs/tune/space/trial-000/output.log"
    ended = [line for line in lines if line.startswith("trial ") and line not in started]
    assert [line.split(":")[0] for line in ended] == [
        "trial 0 [1/3] lr=0.01",
        "trial 1 [2/3] lr=0.2",
        "trial 2 [3/3] lr=1e+12",
    ]
    assert "failed: " in ended[2]
    for name in ("history", "importances", "parallel"):
        assert (folder / f"{name}.png").stat().st_size > 1000, name
    # Each trial is a run of its own, its config that of a fit with the drawn values; the files the tune
    # process and its trials talk through are kept apart.
    for row in rows:
        assert {p.name for p in (folder / row["run"]).iterdir()} == {"version_0", "output.log"}
        config = yaml.safe_load((folder / row["run"] / "version_0" / "config.yaml").read_text())
        assert config["model"]["optimizer"]["init_args"]["lr"] == float(row["model.optimizer.lr"])
        assert config["data"]["init_args"]["batch_size"] == 32
    best = max(rows[:2], key=lambda r: float(r["value"]))
    assert f"best: trial {best['number']}, val/acc {float(best['value']):.4f}" in result.stderr

    # best.yaml is the best trial as a plain fit: the same val/acc, in a run folder of the user's root.
    config = yaml.safe_load((folder / "best.yaml").read_text())
    assert config["trainer"]["default_root_dir"] == "runs" and config["name"] is None
    callbacks = [c["class_path"] if isinstance(c, dict) else c for c in config["trainer"]["callbacks"]]
    assert not [c for c in callbacks if c.startswith("app.tune")]
    again = tmp_path / "again"
    check(run_app("fit", f"--config={folder / 'best.yaml'}", shrink=False, cwd=again))
    assert max(logged(run_folder(again))["val/acc"]) == float(best["value"])

    # optuna-dashboard's web app, served on 127.0.0.1, answers with the study and its trials. (Imported
    # here: at collection it would cost every test process 0.2 s.)
    import optuna_dashboard

    server = make_server(
        "127.0.0.1", 0, optuna_dashboard.wsgi(f"sqlite:///{folder / 'study.db'}"), handler_class=Quiet
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}/api/studies"
        (study,) = json.load(urllib.request.urlopen(base, timeout=30))["study_summaries"]
        assert study["study_name"] == "space"
        trials = json.load(urllib.request.urlopen(f"{base}/{study['study_id']}", timeout=30))["trials"]
        assert [(t["number"], t["state"]) for t in trials] == [(0, "Complete"), (1, "Complete"), (2, "Fail")]
    finally:
        server.shutdown()
