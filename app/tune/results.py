"""What a study leaves in its folder: ``trials.csv``, ``best.yaml`` and Optuna's plots.

``trials.csv`` has a row a trial: its values, its value (the mean over its fits where it has several),
``std`` (over its folds, or its seeds), a ``seed S`` column a seed under ``--tune.seeds`` (that seed's
value), its run folder, time and error."""

import csv
import io
import json
import sys
import warnings
from pathlib import Path

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState

from app.tune.report import replace
from app.tune.space import Space
from app.tune.study import ERROR, HOST, RESUMES, RUN, SURPLUS

REPORT = "app.tune.report.TrialReport"
SEEDS = "seeds"  # a trial's user attribute under --tune.seeds: each seed's value, by seed


def fit_value(channel: Path) -> float | None:
    """The value kept by a finished fit of a trial (a resumed trial does not run it again)."""
    try:
        return json.loads((channel / "result.json").read_text())["value"]
    except FileNotFoundError:
        return None


def keep_fit_value(channel: Path, value: float) -> None:
    replace(channel / "result.json", json.dumps({"value": value}) + "\n")


def write(study: optuna.Study, folder: Path, space: Space, base, draw: bool = True) -> None:
    """``trials.csv``, ``best.yaml``, the plots (where ``draw``), and the summary line."""
    trials = [t for t in study.get_trials(deepcopy=False) if not t.user_attrs.get(SURPLUS)]
    keys = sorted({key for t in trials for key in t.params})
    seeds = sorted({int(seed) for t in trials for seed in t.user_attrs.get(SEEDS, {})})
    rows = io.StringIO()
    writer = csv.writer(rows)
    columns = ["number", "state", *keys, "value", "std", *(f"seed {s}" for s in seeds)]
    writer.writerow([*columns, "run", "seconds", "resumes", "error"])
    for t in trials:
        seconds = t.duration.total_seconds() if t.duration else ""
        writer.writerow(
            [
                t.number,
                t.state.name,
                *(t.params.get(k, "") for k in keys),
                "" if t.value is None else t.value,
                t.user_attrs.get("std", ""),
                *(t.user_attrs.get(SEEDS, {}).get(str(s), "") for s in seeds),
                t.user_attrs.get(RUN, ""),
                f"{seconds:.1f}" if seconds else "",
                t.user_attrs.get(RESUMES, ""),
                t.user_attrs.get(ERROR, ""),
            ]
        )
    replace(folder / "trials.csv", rows.getvalue())
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    if not done:
        return
    best = study.best_trial
    best_config(best, folder, base)
    if draw:
        plots(study, folder)
    summary(best, trials, space)


def summary(best: FrozenTrial, trials: list[FrozenTrial], space: Space) -> None:
    baseline = next((t for t in trials if t.user_attrs.get("baseline")), None)
    spread = f" ± {best.user_attrs['std']:.4f}" if "std" in best.user_attrs else ""
    line = f"best: trial {best.number}, {space.metric} {best.value:.4f}{spread}"
    if baseline is not None and baseline.value is not None and baseline.number != best.number:
        line += f" (the config's own values, trial {baseline.number}: {baseline.value:.4f})"
    print(line, file=sys.stderr)


def best_config(best: FrozenTrial, folder: Path, base) -> None:
    """``best.yaml``: the best trial's run config, as ``python -m app fit --config best.yaml`` trains it."""
    run = folder / best.user_attrs[RUN]
    found = sorted(first_fit(run).glob("version_*/config.yaml"))
    if not found:
        host = best.system_attrs.get(HOST, "another machine")
        print(
            f"best: trial {best.number}'s run {run} is on {host}, not seen here: no best.yaml",
            file=sys.stderr,
        )
        return
    config = yaml.safe_load(found[-1].read_text())
    trainer = config.get("trainer", {})
    callbacks = trainer.get("callbacks") or []
    trainer["callbacks"] = [
        c for c in callbacks if not (isinstance(c, dict) and c.get("class_path") == REPORT)
    ]
    trainer["default_root_dir"] = base.given.trainer.default_root_dir
    config["name"], config["ckpt_path"], config["test_after_fit"] = None, None, base.given.test_after_fit
    data = config.get("data", {}).get("init_args", {})
    data.pop("folds", None), data.pop("fold", None)  # trained on the whole training split, as fit does
    header = f"# Trial {best.number}, the best of study {folder.name}: python -m app fit --config best.yaml\n"
    replace(folder / "best.yaml", header + yaml.safe_dump(config, sort_keys=False))


def first_fit(run: Path) -> Path:
    """The folder of a trial's first fit under its folder ``run``: its first seed's, its first fold's."""
    seeds = sorted(run.glob("seed-*"), key=lambda p: int(p.name.removeprefix("seed-")))
    first = seeds[0] if seeds else run
    return first / "fold-0" if (first / "fold-0").is_dir() else first


def plots(study: optuna.Study, folder: Path) -> None:
    """Optuna's optimization history, parameter importances and parallel coordinates, as PNGs."""
    import matplotlib

    matplotlib.use("Agg")  # this process draws no window
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as draw

    for name, plot in (
        ("history", draw.plot_optimization_history),
        ("importances", draw.plot_param_importances),
        ("parallel", draw.plot_parallel_coordinate),
    ):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Optuna marks its matplotlib plots experimental
                axes = plot(study)
        except (ValueError, RuntimeError, ZeroDivisionError):
            continue  # too few finished trials (or parameters) for this plot
        figure = getattr(axes, "figure", None) or axes.flat[0].figure
        figure.savefig(folder / f"{name}.png", dpi=100, bbox_inches="tight")
        plt.close(figure)
