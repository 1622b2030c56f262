"""The W&B sweep schema read as Optuna's: each method and distribution drawn through Optuna's own samplers
(values inside the range, on the scale asked for), and what Optuna cannot draw refused in one line."""

import math

import optuna
import pytest
import yaml
from helpers.cli import ROOT

from app.errors import UsageError
from app.tune.draws import PerTrial, reseeded
from app.tune.space import load

optuna.logging.set_verbosity(optuna.logging.WARNING)


def space_file(tmp_path, parameters: dict, **top):
    path = tmp_path / "space.yaml"
    path.write_text(
        yaml.safe_dump({"metric": {"name": "val/acc", "goal": "maximize"}, "parameters": parameters, **top})
    )
    return path


def draws(space, n: int = 40) -> list[dict]:
    study = optuna.create_study(direction=space.direction, sampler=space.sampler(0), pruner=space.pruner())
    for point in space.points() or []:  # a grid's, queued as tune queues them
        study.enqueue_trial(point)
    drawn = []
    for _ in range(n):
        trial = study.ask(space.distributions_for_ask())
        drawn.append(trial.params)
        study.tell(trial, sum(v for v in trial.params.values() if isinstance(v, int | float)))
    return drawn


@pytest.mark.parametrize("method", ["random", "bayes", "grid"])
def test_each_method_draws_every_distribution_within_its_range(method, tmp_path):
    parameters = {
        "a.values": {"values": [32, 64, 128]},
        "a.categorical": {"distribution": "categorical", "values": ["x", "y"]},
        "a.int": {"distribution": "int_uniform", "min": 2, "max": 5},
        "a.const": {"value": 7},
        "a.constant": {"distribution": "constant", "value": "z"},
    }
    if method != "grid":
        parameters |= {
            "a.uniform": {"distribution": "uniform", "min": 0.1, "max": 0.3},
            "a.inferred_float": {"min": 0.0, "max": 1.0},
            "a.inferred_int": {"min": 1, "max": 3},
            "a.q": {"distribution": "q_uniform", "min": 0.0, "max": 1.0, "q": 0.25},
            "a.log": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
            "a.ln": {"distribution": "log_uniform", "min": math.log(1e-3), "max": math.log(1e-1)},
        }
    space = load(space_file(tmp_path, parameters, method=method), "val/loss", "minimize")
    assert (space.metric, space.direction, space.method) == ("val/acc", "maximize", method)
    assert space.fixed == {"a.const": 7, "a.constant": "z"}
    drawn = draws(space, 24 if method == "grid" else 40)
    for params in drawn:
        assert params["a.values"] in (32, 64, 128) and params["a.categorical"] in ("x", "y")
        assert params["a.int"] in range(2, 6) and isinstance(params["a.int"], int)
        if method != "grid":
            assert 0.1 <= params["a.uniform"] <= 0.3 and 0.0 <= params["a.inferred_float"] <= 1.0
            assert params["a.inferred_int"] in (1, 2, 3)
            assert params["a.q"] in (0.0, 0.25, 0.5, 0.75, 1.0)
            assert 1e-4 <= params["a.log"] <= 1e-1 and 1e-3 - 1e-12 <= params["a.ln"] <= 1e-1 + 1e-12
    if method == "grid":  # every point once
        assert len(space.points()) == 3 * 2 * 4
        assert len({tuple(sorted(p.items())) for p in drawn}) == 24
    elif method == "random":  # the log scale: a tenth or more in the lowest decade (uniform: 0.1 %)
        # (TPE's draws follow the values told, which here favour a large a.log.)
        assert sum(p["a.log"] < 1e-3 for p in drawn) >= 4


def test_hyperband_is_successive_halving_from_min_iter(tmp_path):
    stop = {"type": "hyperband", "min_iter": 2, "eta": 2}
    space = load(space_file(tmp_path, {"x": {"values": [1, 2]}}, early_terminate=stop), "val/acc", "maximize")
    pruner = space.pruner()
    assert isinstance(pruner, optuna.pruners.SuccessiveHalvingPruner)
    # Trials that trail at the first rung (2 validations) are stopped there; none before it.
    study = optuna.create_study(direction="maximize", pruner=pruner, sampler=optuna.samplers.RandomSampler(0))
    for value in (0.9, 0.8, 0.7, 0.95):
        trial = study.ask({"x": optuna.distributions.CategoricalDistribution([1, 2])})
        trial.report(value, 0)
        assert not trial.should_prune()
        trial.report(value, 1)
        trial.report(value, 2)
        study.tell(trial, state=optuna.trial.TrialState.PRUNED) if trial.should_prune() else study.tell(
            trial, value
        )
    states = [t.state.name for t in study.trials]
    assert "PRUNED" in states and states[0] == "COMPLETE"
    no_stop = load(space_file(tmp_path, {"x": {"values": [1, 2]}}), "val/acc", "maximize")
    assert isinstance(no_stop.pruner(), optuna.pruners.NopPruner)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"distribution": "normal", "mu": 0, "sigma": 1}, "normal cannot be drawn by Optuna"),
        ({"distribution": "q_log_uniform_values", "min": 1, "max": 10, "q": 1}, "q_log_uniform_values"),
        ({"distribution": "log_normal", "mu": 0, "sigma": 1}, "log_normal"),
        ({"distribution": "inv_log_uniform_values", "min": 1, "max": 10}, "inv_log_uniform_values"),
        ({"distribution": "beta", "a": 1, "b": 1}, "beta"),
        ({"values": [1, 2], "probabilities": [0.5, 0.5]}, "probabilities"),
        ({"parameters": {"b": {"values": [1]}}}, "nested parameters"),
        ({"values": [[1, 2], [3]]}, "is not a number, string"),
        ({"distribution": "uniform", "min": 1.0}, "needs min and max"),
        ({"distribution": "uniform", "min": 2.0, "max": 1.0}, "x.y"),
    ],
)
def test_what_optuna_cannot_draw_is_refused_naming_the_key(spec, named, tmp_path):
    with pytest.raises(UsageError) as raised:
        load(space_file(tmp_path, {"x.y": spec}), "val/acc", "maximize")
    message = str(raised.value)
    assert message.startswith("parameter x.y:") and named in message and "\n" not in message


def test_grid_over_a_continuous_range_is_refused(tmp_path):
    space = load(space_file(tmp_path, {"lr": {"min": 0.1, "max": 0.2}}, method="grid"), "val/acc", "maximize")
    with pytest.raises(UsageError, match="method grid needs listed values: lr"):
        space.points()


def test_the_space_hash_changes_with_the_space_and_only_with_it(tmp_path):
    one = load(space_file(tmp_path, {"lr": {"min": 0.1, "max": 0.2}}), "val/acc", "maximize")
    same = load(space_file(tmp_path, {"lr": {"min": 0.1, "max": 0.2}}), "val/acc", "maximize")
    other = load(space_file(tmp_path, {"lr": {"min": 0.1, "max": 0.3}}), "val/acc", "maximize")
    assert one.digest() == same.digest() != other.digest()


def test_the_fast_presets_own_values_are_its_spaces_trial_0():
    sweep = ROOT / "configs" / "sweeps" / "fashion_mnist_fast.yaml"
    if not sweep.is_file():
        pytest.skip("the W&B sweeps part (configs/sweeps) was dropped")
    from app.tune.probe import probe

    base = probe([f"--config={ROOT / 'configs' / 'fashion_mnist_fast.yaml'}", f"--tune.space={sweep}"])
    space = load(sweep, base.monitor, base.mode)
    base.check(space)
    values, outside = base.baseline(space)
    assert outside is None
    assert values == {
        "model.optimizer.lr": 0.2,
        "model.optimizer.weight_decay": 5e-4,
        "model.label_smoothing": 0.1,
        "model.scheduler.warmup_ratio": 0.1,
        "data.batch_size": 256,
    }
    assert {type(v) for v in values.values()} == {float, int}  # plain values, as Optuna keeps them


def test_a_class_key_is_never_the_configs_own_value(mnist_root, tmp_path):
    """A class is its path and its init_args, which a drawn path alone would not carry: trial 0 is drawn."""
    from app.tune.probe import probe

    sweep = space_file(tmp_path, {"model.net": {"values": ["models.MnistCNN", "FastCNN"]}})
    base = probe([f"--data.root={mnist_root}", f"--tune.space={sweep}"])
    space = load(sweep, base.monitor, base.mode)
    base.check(space)
    assert base.baseline(space) == ({}, "model.net='models.MnistCNN'")


def test_workers_on_one_study_draw_distinct_values_and_one_worker_draws_reproducibly(tmp_path):
    space = load(space_file(tmp_path, {"lr": {"min": 0.1, "max": 0.2}}), "val/acc", "maximize")
    storage = optuna.storages.InMemoryStorage()
    first = optuna.create_study(study_name="s", storage=storage, sampler=space.sampler(0))
    second = optuna.load_study(study_name="s", storage=storage, sampler=space.sampler(0))  # same seed
    for study in (first, second) * 4:  # two workers taking turns, as two tune processes do
        trial = study.ask(space.distributions_for_ask())
        study.tell(trial, 0.5)
    drawn = [t.params["lr"] for t in first.trials]
    assert len(set(drawn)) == 8
    alone = optuna.create_study(sampler=space.sampler(0))  # one worker, the same seed: the same draws
    assert [alone.ask(space.distributions_for_ask()).params["lr"] for _ in range(8)] == drawn
    other = optuna.create_study(sampler=space.sampler(1))
    assert other.ask(space.distributions_for_ask()).params["lr"] != drawn[0]
    # A --tune.sampler of the user's, seeded: each worker's copy still draws its own values.
    given = optuna.samplers.RandomSampler(seed=0)
    storage = optuna.storages.InMemoryStorage()
    first = optuna.create_study(study_name="u", storage=storage, sampler=PerTrial(reseeded(given), 0))
    second = optuna.load_study(study_name="u", storage=storage, sampler=PerTrial(reseeded(given), 0))
    for study in (first, second) * 2:
        study.tell(study.ask(space.distributions_for_ask()), 0.5)
    assert len({t.params["lr"] for t in first.trials}) == 4


def test_a_sweep_file_without_a_goal_is_minimized_as_in_wandb(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(
        yaml.safe_dump({"metric": {"name": "val/loss"}, "parameters": {"lr": {"values": [1, 2]}}})
    )
    assert (load(path, "val/acc", "maximize").metric, load(path, "val/acc", "maximize").direction) == (
        "val/loss",
        "minimize",
    )
    path.write_text(yaml.safe_dump({"parameters": {"lr": {"values": [1, 2]}}}))  # no metric: the config's
    assert load(path, "val/acc", "maximize").direction == "maximize"


@pytest.mark.parametrize(
    ("top", "named"),
    [
        ({"metric": None}, "metric must be a mapping with a name"),
        ({"metric": "val/acc"}, "metric must be a mapping with a name"),
        ({"metric": {"goal": "maximize"}}, "metric must be a mapping with a name"),
        ({"early_terminate": "hyperband"}, "early_terminate must be {type: hyperband"),
        ({"early_terminate": {"type": "envelope"}}, "early_terminate must be {type: hyperband"),
        ({"early_terminate": {"type": "hyperband", "min_iter": 0}}, "early_terminate min_iter must be"),
        (
            {"early_terminate": {"type": "hyperband", "min_iter": 2, "eta": "3"}},
            "early_terminate eta must be",
        ),
        ({"early_terminate": {"type": "hyperband"}}, "needs min_iter or max_iter"),
    ],
)
def test_a_malformed_sweep_file_is_refused_in_one_line(top, named, tmp_path):
    with pytest.raises(UsageError) as raised:
        load(space_file(tmp_path, {"x.y": {"values": [1, 2]}}, **top), "val/acc", "maximize")
    message = str(raised.value)
    assert message.startswith("--tune.space ") and named in message and "\n" not in message
