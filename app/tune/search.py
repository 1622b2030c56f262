"""A tune process's search: fit's flags checked, the study opened, trials run until it has its count."""

import math
import os
import statistics
import sys
import time
from pathlib import Path

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState
from rich.console import Console
from rich.progress import Progress, TimeElapsedColumn

from app.errors import UsageError
from app.tune import results
from app.tune.identity import identity
from app.tune.opening import open_study
from app.tune.probe import Base, probe
from app.tune.space import Space, load
from app.tune.study import (
    CHANNELS,
    ERROR,
    GRACE,
    HEARTBEAT,
    RESUMES,
    RUN,
    SURPLUS,
    Heartbeat,
    StorageGone,
    Watch,
    fresh,
    past_count,
    requeue,
    take_over,
)
from app.tune.trial import Fit, Stopped, fit_command, repeats, run_fit

ALIKE = 3  # trials in a row failing with one error: the study stops (the next would fail alike)


class Tune:
    """One tune process: checks everything first, then runs trials until the study has its count."""

    def __init__(self, args: list[str]) -> None:
        self.base: Base = probe(args)
        self.options = options = self.base.options
        self.fit_args = self.base.fit_args  # a trial's: tune's own flags left out
        space = (
            load(Path(options.space), self.base.monitor, self.base.mode)
            if options.space
            else Space({}, {}, self.base.monitor, self.base.mode)
        )
        self.base.check(space)  # every key, value and the metric, before anything is written
        self.space = space
        searched = [*space.distributions, *space.fixed]
        self.settings = identity(self.base.given, searched, space.digest(), options.folds, options.seeds)
        # --tune.seeds N: seeds SEED to SEED+N-1, the first the config's own (None: each fit the config's).
        self.seeds = [self.base.seed + s for s in range(options.seeds)] if options.seeds > 1 else None
        configs = [Path(str(config)).stem for config in self.base.given.get("config") or []]
        # A cross-validation, or repeats over seeds, is of its config.
        repeat = "-".join(["cv" if options.folds > 1 else "seeds", *configs[-1:]])
        self.name = options.study_name or (Path(options.space).stem if options.space else repeat)
        self.folder = self.base.root / "tune" / self.name
        self.points = space.points()
        self.count = 1 if options.space is None else len(self.points or []) or options.trials
        if self.points is not None and options.trials != len(self.points):
            print(f"tune: the grid has {self.count} points: {self.count} trials", file=sys.stderr)
        self.started = time.monotonic()
        self.errors: list[str | None] = []  # how this process's trials ended: None where they did not fail

    def run(self) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # the lines below say what happens
        study, storage = open_study(self)
        self.folder.mkdir(parents=True, exist_ok=True)
        print(
            f"tune: study {self.name}, {self.count} trial(s) of {self.space.metric} "
            f"({self.space.direction}); folder {self.folder}",
            file=sys.stderr,
        )
        deadline = self.started + self.options.timeout if self.options.timeout else math.inf
        # A bar of the study's ended trials on a terminal (the lines above it are printed as usual).
        bar = Progress(
            *Progress.get_default_columns()[:3],
            TimeElapsedColumn(),
            transient=True,
            console=Console(stderr=True),
            disable=not sys.stderr.isatty(),
        )
        task = bar.add_task("trials", total=self.count)
        watch = Watch()
        try:
            bar.start()
            while True:
                take_over(study, storage, watch)
                trials = study.get_trials(deepcopy=False)
                bar.update(task, completed=len([t for t in fresh(trials) if t.state.is_finished()]))
                queued = any(t.state == TrialState.WAITING for t in trials)
                if not queued and len(fresh(trials)) >= self.count:
                    if not any(t.state == TrialState.RUNNING for t in trials):
                        break
                    time.sleep(HEARTBEAT / 5)  # another process's trial: resume it should that process end
                    continue
                if time.monotonic() > deadline:
                    print("tune: --tune.timeout reached; no new trial starts", file=sys.stderr)
                    break
                trial = study.ask(self.space.distributions_for_ask())
                if past_count(study, trial, self.count):
                    trial.set_user_attr(SURPLUS, True)  # another process drew the last one at the same time
                    study.tell(trial, state=TrialState.FAIL)
                    continue
                self.run_trial(study, storage, trial)
        except BaseException as stopped:
            bar.stop()
            if not isinstance(stopped, StorageGone):  # the table and best.yaml so far; plots at the end
                results.write(study, self.folder, self.space, self.base, draw=False)
            raise
        bar.stop()
        results.write(study, self.folder, self.space, self.base)

    def run_trial(
        self, study: optuna.Study, storage: optuna.storages.BaseStorage, trial: optuna.Trial
    ) -> None:
        name = trial.user_attrs.get(RUN) or f"trial-{trial.number:03d}"
        trial.set_user_attr(RUN, name)
        values = {**self.space.fixed, **trial.params}
        if RESUMES in trial.user_attrs and not (self.folder / name).is_dir():
            print(
                f"tune: trial {trial.number} resumes trial {trial.user_attrs[RESUMES]}, whose run folder "
                f"{self.folder / name} this machine does not see: it trains from the start",
                file=sys.stderr,
            )
        fits = repeats(self.seeds, self.options.folds)
        several = f" (fit 1 of {len(fits)})" if len(fits) > 1 else ""
        log = self.folder / name / fits[0][0] / "output.log"
        shown = f"trial {trial.number}{self.shown(trial)}"
        print(f"{shown}: started, log {log}{several}", file=sys.stderr, flush=True)
        beat = Heartbeat(study, storage, trial.number, os.getpid())
        started, ended = time.monotonic(), []
        env = {**os.environ, "WANDB_RUN_GROUP": self.name}
        try:
            for number, (part, extra) in enumerate(fits):
                sub = f"{name}/{part}" if part else name
                run, channel = self.folder / sub, self.folder / CHANNELS / sub
                kept = results.fit_value(channel)
                if kept is not None:
                    ended.append(Fit([kept]))
                    continue
                command = fit_command(
                    self.fit_args,
                    {**values, **extra},
                    sub,
                    self.folder,
                    channel,
                    self.space.metric,
                    run.is_dir(),
                )
                stop = lambda: beat.taken.is_set() or beat.lost.is_set()  # noqa: E731
                fit = run_fit(command, run, channel, trial if number == 0 else None, env, stop)
                ended.append(fit)
                if fit.error or fit.pruned:
                    break
                if fit.best(self.space.direction) is None:
                    fit.error = f"{self.space.metric} was never logged"
                    break
                results.keep_fit_value(channel, fit.best(self.space.direction))
        except (Stopped, UpdateFinishedTrialError):
            beat.stop()
            if beat.lost.is_set():
                print(
                    f"trial {trial.number}: no heartbeat reached the storage for {GRACE} s: its fit stopped "
                    "(last.ckpt saved), for the next tune process to resume",
                    file=sys.stderr,
                )
                self.requeue(study, storage, trial, "its tune process lost the storage; queued to resume")
                return
            print(
                f"trial {trial.number}: taken over by another tune process (its heartbeat was late): its fit "
                "here stopped (last.ckpt saved)",
                file=sys.stderr,
            )
            return
        except StorageGone:
            beat.stop()
            raise  # the trial is taken over once the storage is back
        except BaseException:
            beat.stop()
            self.requeue(study, storage, trial, "stopped; queued to resume")
            raise
        beat.stop()
        self.finish(study, trial, ended, time.monotonic() - started)

    @staticmethod
    def requeue(
        study: optuna.Study, storage: optuna.storages.BaseStorage, trial: optuna.Trial, why: str
    ) -> None:
        requeue(study, storage, study.get_trials(deepcopy=False)[trial.number], why)

    @staticmethod
    def shown(trial: optuna.Trial) -> str:
        """The trial's values, as `` lr=0.01 batch_size=64``."""
        return "".join(
            f" {key.rsplit('.', 1)[-1]}={value:.4g}"
            if isinstance(value, float)
            else f" {key.rsplit('.', 1)[-1]}={value}"
            for key, value in trial.params.items()
        )

    def value(self, trial: optuna.Trial, scores: list[float]) -> tuple[float, str]:
        """The trial's value from its fits' ``scores`` (see :func:`repeats`), kept with their spread in its
        user attributes, and how it is said (``val/acc 0.9123 ± 0.0040 over 3 seeds``)."""
        metric, folds = self.space.metric, self.options.folds
        if self.seeds:
            # A seed's value is its mean over the folds; the spread is the seeds'.
            by_seed = {
                str(seed): statistics.fmean(scores[i * folds : (i + 1) * folds])
                for i, seed in enumerate(self.seeds)
            }
            value, spread = statistics.fmean(by_seed.values()), statistics.stdev(by_seed.values())
            trial.set_user_attr(results.SEEDS, by_seed)
            trial.set_user_attr("std", spread)
            each = f" (each the mean over {folds} folds)" if folds > 1 else ""
            return value, f"{metric} {value:.4f} ± {spread:.4f} over {len(by_seed)} seeds{each}"
        value = statistics.fmean(scores)
        if len(scores) == 1:
            return value, f"{metric} {value:.4f}"
        trial.set_user_attr("folds", scores)
        trial.set_user_attr("std", statistics.stdev(scores))
        return value, f"{metric} {value:.4f} ± {statistics.stdev(scores):.4f} over {len(scores)} folds"

    def finish(self, study: optuna.Study, trial: optuna.Trial, fits: list[Fit], seconds: float) -> None:
        """Tell the study how the trial ended, and print its line."""
        last, metric = fits[-1], self.space.metric
        try:
            if last.error:
                trial.set_user_attr(ERROR, last.error)
                told = study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
                outcome = f"failed: {last.error}"
            elif last.pruned:
                told = study.tell(trial, state=TrialState.PRUNED, skip_if_finished=True)
                outcome = f"pruned after {len(last.values)} validation(s) ({metric} {last.values[-1]:.4f})"
            else:
                value, outcome = self.value(trial, [fit.best(self.space.direction) for fit in fits])
                told = study.tell(trial, value, skip_if_finished=True)
            taken = told.state == TrialState.FAIL and not last.error
        except UpdateFinishedTrialError:
            taken = True
        if taken:
            print(
                f"trial {trial.number}: taken over by another tune process (its heartbeat was late) as it "
                "ended; the other one's run counts",
                file=sys.stderr,
            )
            return
        ended = [t for t in fresh(study.get_trials(deepcopy=False)) if t.state.is_finished()]
        shown = self.shown(trial)
        resumed = f" (resumes trial {trial.user_attrs[RESUMES]})" if RESUMES in trial.user_attrs else ""
        print(
            f"trial {trial.number} [{len(ended)}/{self.count}]{shown}: {outcome}{resumed} ({seconds:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        self.errors.append(last.error)
        alike = last.error is not None and self.errors[-ALIKE:] == [last.error] * ALIKE
        if last.error and (trial.user_attrs.get("baseline") or not self.options.space or alike):
            # The config itself fails, or whatever is drawn: every trial would, for the same reason.
            raise UsageError(f"trial {trial.number} failed, as the rest would: {last.error}")
