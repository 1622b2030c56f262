"""The command line: LightningCLI over ``models`` and ``data``, one run folder per run, one-line errors."""

import difflib
import functools
import importlib
import pkgutil
import shlex
import signal
import sys
from pathlib import Path

from jsonargparse import ArgumentError, Namespace
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.core.datamodule import LightningDataModule
from lightning.pytorch.utilities import rank_zero_info, rank_zero_only
from lightning.pytorch.utilities.exceptions import MisconfigurationException

import models
from app import process
from app.distributed.preemption import stopped
from app.errors import LOADERS, USER_ERRORS, UsageError, fail, in_collective, raised_in
from app.parser import Parser, one_line
from app.runs import folder
from app.runs.checkpoints import check_checkpoint, check_fits, data_card, last_of
from app.runs.config import RunConfig
from app.runs.csv_logger import AppendingCSVLogger  # noqa: F401 (so that --trainer.logger AppendingCSVLogger finds it)
from app.trainer import Trainer
from data import DataError
from data.contract import card, provided
from models.image_classifier import OBJECTS

DEFAULTS = Path(__file__).resolve().parents[1] / "configs" / "defaults.yaml"
# Always on, whatever trainer.callbacks lists: what checkpoints and resumes rely on (by import path: an
# optional part's is its one line).
ALWAYS_ON = {
    "checkpoint": "lightning.pytorch.callbacks.ModelCheckpoint",
    "last_checkpoint": "app.callbacks.last_checkpoint.LastCheckpoint",
    "nan_stop": "app.nan_stop.StopOnNonFiniteWeights",  # app/nan_stop/
}


class CLI(LightningCLI):
    """``python -m app fit|validate|test|predict`` and the Trainer's other commands; defaults in
    ``configs/defaults.yaml``."""

    def __init__(self, *args, **kwargs) -> None:
        self.commands = commands_for(kwargs.get("args"))
        # LightningCLI parses, builds and runs in its constructor: failures and stops are handled here.
        try:
            super().__init__(*args, **kwargs)
        except BaseException as err:
            run, trainer = getattr(self, "run", None), getattr(self, "trainer", None)
            if run is not None and (trainer is None or trainer.global_step == 0) and not stopped(err):
                folder.discard(run)  # a start that failed: nothing worth keeping
            if stopped(err) and run is not None:
                finish_wandb()  # its closing lines before the resume line, which ends the output
                # LastCheckpoint stops for a first Ctrl-C during fit as for a SIGTERM, so that it saves.
                last = self.config_init[self.subcommand].get("last_checkpoint")
                signum = getattr(last, "stopped_by", 0) or signal.SIGTERM
                ctrl_c = signum == signal.SIGINT
                resume = ["python", "-m", "app", *without_ckpt_path(self.given), "--ckpt_path", "last"]
                if rank_zero_only.rank == 0:  # the line once per job, not per rank
                    sys.stderr.write(
                        f"stopped by {'Ctrl-C' if ctrl_c else signal.Signals(signum).name}: saved "
                        f"{last_of(run.folder)}; resume with: {shlex.join(resume)}\n"
                    )
                # 143 for any other signal: "stopped, last.ckpt saved" to a batch script (it requeues).
                sys.exit(128 + (signal.SIGINT if ctrl_c else signal.SIGTERM))
            unreachable = getattr(getattr(self, "datamodule", None), "unreachable", None)
            if unreachable is not None:  # its own on_exception asked the store: gone
                fail(f"{unreachable}: it stopped answering mid-run; {self.rerun()}")
            raise
        finally:
            finish_wandb()
        if self.trainer.fast_dev_run:
            folder.discard(self.run)  # a smoke test of the code: nothing of it is kept

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        for key, path in ALWAYS_ON.items():
            parser.add_lightning_class_args(pkgutil.resolve_name(path), key)
        # Under configs/defaults.yaml's (W&B's): Lightning's default logger, named, so that it writes into
        # the run folder and a --trainer.logger of Lightning's finds the save_dir it requires.
        tensorboard = "lightning.pytorch.loggers.TensorBoardLogger"
        parser.set_defaults({"trainer.logger": {"class_path": tensorboard, "init_args": {"save_dir": "."}}})
        parser.add_argument(
            "--name",
            type=str | None,
            default=None,
            help="Runs go to ROOT/NAME/version_N/ (ROOT: --trainer.default_root_dir); default DATA-NET.",
        )
        parser.add_argument(
            "--test_after_fit", type=bool, default=True, help="Test the best checkpoint when fit ends."
        )
        parser.add_argument(
            "--untrained",
            type=bool,
            default=False,
            help="validate/test/predict/export the model as built, without --ckpt_path.",
        )
        for key in ("in_channels", "image_size"):
            parser.link_arguments(f"data.{key}", f"model.net.init_args.{key}", apply_on="instantiate")
        for target in ("model.net.init_args.num_classes", "model.num_classes"):
            parser.link_arguments("data", target, compute_fn=self._num_classes, apply_on="instantiate")

    def _num_classes(self, data: LightningDataModule) -> int:
        # A checkpoint knows its classes: predict and export work when the training data is gone.
        try:
            return data.num_classes
        except DataError:
            if "num_classes" not in self.saved_card:
                raise
            return self.saved_card["num_classes"]

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        given = self.given = list(sys.argv[1:] if args is None else args)
        config = folder.run_config(given)
        if config is not None:  # read under the flags, as a default of the command's own
            parser.subcommands_action.choices[given[0]].default_config_files = [str(DEFAULTS), str(config)]
        try:
            super().parse_arguments(parser, args)
        except ArgumentError as err:
            line = one_line(str(err), given, parser)
            try:
                if config is not None:  # the command without flags: do the run config's own values parse?
                    parser.parse_args([given[0]])
            except ArgumentError:
                line += (
                    f"; it is in {config}, the run config of --ckpt_path, read before the flags: fix it "
                    "there, or pass the network and data flags yourself with --config FILE"
                )
            raise UsageError(line) from None
        # Lightning reads hyperparameters from --ckpt_path right after parsing: check the file first.
        subcommand = self.config.get("subcommand")
        ckpt = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt and ckpt != "last":
            check_checkpoint(ckpt)
        # Lightning then puts the checkpoint's hyperparameters over these: see before_instantiate_classes.
        self.chosen = (
            {key: class_path(self.config[subcommand].model.get(key)) for key in OBJECTS} if ckpt else {}
        )

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand]
        for key, mine in self.chosen.items():
            theirs = class_path(config.model.get(key))
            if theirs != mine:  # the checkpoint's network, optimizer or schedule is not this run's
                raise UsageError(
                    f"--ckpt_path {config.ckpt_path} was trained with --model.{key} {short(theirs)}, this "
                    f"run has {short(mine)}: drop --model.{key} (the checkpoint's is used), or start a new "
                    f"run from its weights with --model.init_from {config.ckpt_path}"
                )
        takes_weights = self.subcommand != "fit" and "ckpt_path" in config
        if takes_weights and not config.get("ckpt_path") and not config.get("untrained"):
            raise UsageError(
                f"{self.subcommand} needs trained weights: pass --ckpt_path RUN/checkpoints/FILE.ckpt "
                "(or --untrained true for the model as built)"
            )
        self.run = folder.resolve(config)
        self.save_config_kwargs["given"] = self.run.given
        if self.subcommand == "fit" and "checkpoint" in config and config.checkpoint.monitor is None:
            # Then it keeps the newest checkpoint, which the default name would call the best.
            config.checkpoint.filename = config.checkpoint.filename.replace("best-", "latest-", 1)
        ckpt = config.get("ckpt_path")
        if ckpt and config.model.get("init_from"):
            # The checkpoint's weights replace every tensor anyway; its init_from file may be gone.
            config.model.init_from = None
        self.saved_card = data_card(ckpt) if ckpt and self.subcommand != "fit" else {}

    def instantiate_classes(self) -> None:
        try:
            super().instantiate_classes()
        except ValueError as err:
            # What a link's compute_fn raised (num_classes, read from the data) comes wrapped by jsonargparse.
            if isinstance(err.__cause__, USER_ERRORS):
                raise err.__cause__ from None
            # An argument a class rejects (ResNet depth 10): the user's to fix, not a bug. A class
            # chosen by class_path has its message wrapped in one about union subtypes: show its own.
            while isinstance(err.__cause__, ValueError):
                err = err.__cause__
            raise UsageError(str(err)) from err
        # The data gets the resize, crop and normalization of the pretrained weights, known once the network
        # is built, after the data (no link can carry them); --data.mean/std given win (follow_weights).
        weights = getattr(getattr(self.model, "net", None), "preprocessing", lambda: None)()
        if weights is not None and hasattr(self.datamodule, "follow_weights"):
            self.datamodule.follow_weights(weights.resize_size, weights.crop_size, weights.mean, weights.std)

    def instantiate_trainer(self, **kwargs) -> Trainer:
        try:
            trainer = super().instantiate_trainer(**kwargs)
            # Checked by Lightning only at launch, after a traceback-prone start: check it now.
            trainer.run_folder = str(self.run.folder)
            environment = getattr(trainer.strategy, "cluster_environment", None)
            if environment is not None:
                # workaround: Lightning checks a cluster's devices at launch (2.6); gone when at build
                environment.validate_settings(trainer.num_devices, trainer.num_nodes)
        except (MisconfigurationException, ValueError, TypeError) as err:
            # Trainer flags this machine or launcher cannot honour: the user's to fix, not a bug.
            raise UsageError(str(err)) from err
        return trainer

    def check_fits(self) -> None:
        """Stop before any work where ``--ckpt_path``'s weights do not fit the model built."""
        ckpt = self.config_init[self.subcommand].get("ckpt_path")
        if ckpt:
            check_fits(ckpt, self.model, resume=self.subcommand == "fit")

    before_validate = before_test = before_predict = before_export = check_fits

    def after_shard(self) -> None:
        folder.discard(self.run)  # it writes nothing there

    @property
    def tests_after_fit(self) -> bool:
        """``--test_after_fit``, where the data has a test split (an image folder's test/ is optional)."""
        return self.config.fit.test_after_fit and provided(self.datamodule, "has_test_split", True)

    def before_fit(self) -> None:
        self.check_fits()
        for callback in self.trainer.callbacks:
            ours = isinstance(callback, ModelCheckpoint)
            flag = "--checkpoint.monitor" if ours else type(callback).__name__
            check_logged(self.model, getattr(callback, "monitor", None), flag)
        if self.config.fit.test_after_fit and not self.tests_after_fit:
            data = type(self.datamodule).__name__
            rank_zero_info(f"fit: {data} has no test split: fit ends without a test")
        if self.tests_after_fit:
            # Not setup("test"): a split that prepare_data has yet to download is not there now.
            provided(self.datamodule, "check_test_split", lambda: None)()
        # Settle the loggers' folders here: under ddp_spawn each launch (fit, then test) would pick its own.
        for logger in self.trainer.loggers:
            _ = logger.version
        trainer, model = self.trainer, self.model
        model.data_card = card(self.datamodule)  # a resume's checkpoint brings its own
        world, accumulate = trainer.world_size, trainer.accumulate_grad_batches
        device = type(trainer.accelerator).__name__.removesuffix("Accelerator").lower()
        batch = provided(self.datamodule, "batch_size")
        accumulated = f" ({batch} x {world} x {accumulate} accumulated)" if accumulate > 1 and batch else ""
        rank_zero_info(
            f"fit: {type(trainer.strategy).__name__}, world size {world} ({trainer.num_nodes} node(s) x "
            f"{trainer.num_devices} {device}), global batch {batch * world * accumulate if batch else '?'}"
            f"{accumulated}, lr {model.scaled_lr(world, accumulate):g}; run folder {self.run.folder}"
        )

    def after_fit(self) -> None:
        summary = []
        best = self.trainer.checkpoint_callback
        if best is not None and best.best_model_score is not None:
            summary.append(f"best {best.monitor} {best.best_model_score:.4f}")
        elif best is not None and best.best_model_path:
            summary.append(f"latest checkpoint {Path(best.best_model_path).name} (no --checkpoint.monitor)")
        if self.tests_after_fit and not self.trainer.interrupted:
            ckpt = best.best_model_path if best is not None and best.best_model_path else "last"
            self.final_test = last_of(self.run.folder) if ckpt == "last" else ckpt
            results = self.trainer.test(
                self.model, datamodule=self.datamodule, ckpt_path=ckpt, weights_only=False
            )
            if results and "test/acc" in results[0]:
                summary.append(f"test/acc {results[0]['test/acc']:.4f}")
        rank_zero_info(f"done: {', '.join([*summary, f'run folder {self.run.folder}'])}")

    def rerun(self) -> str:
        """What to run once the data is back: a fit's resume, the test alone of a fit whose training is
        done, or the same validate, test or predict."""
        if self.subcommand != "fit":
            return f"once it is back, run it again: {shlex.join(['python', '-m', 'app', *self.given])}"
        if getattr(self, "final_test", None) is None:
            return f"once it is back, {resume_with(self.given)}"
        test = shlex.join(["python", "-m", "app", "test", "--ckpt_path", str(self.final_test)])
        return (
            "training is complete (its checkpoints kept), only the test after it could not read the "
            f"test split; once it is back, test with: {test}"
        )

    def subcommands(self) -> dict[str, set[str]]:  # the ones built: see commands_for
        return self.commands


def main(args: list[str] | None = None) -> None:
    """Run the CLI; problems the user can fix end in one ``error:`` line and exit status 1."""
    given = sys.argv[1:] if args is None else args
    if given and given[0] in programs():
        # An optional part that is a program of its own, not a Trainer method (app/NAME/command.py).
        importlib.import_module(f"app.{given[0]}.command").main(given[1:])
        return
    known = [*commands_for([]), *programs()]
    if given and not given[0].startswith("-") and given[0] not in known:
        close = difflib.get_close_matches(given[0], known, n=1)
        fail(f"{given[0]!r} is not a command: {', '.join(known)}" + (f"; close: {close[0]}" if close else ""))
    process.prepare()
    try:
        build(CLI, args)
    except USER_ERRORS as err:
        fail(str(err))
    except FileNotFoundError as err:
        # Raised by readers outside ours (a DataModule of yours, torchvision's): the path they name.
        fail(f"{err.strerror}: {err.filename}" if err.filename else str(err))
    except RuntimeError as err:
        # torch's SIGCHLD handler raises again, wherever this process is, for each dead loader worker it
        # still knows (an out-of-memory kill takes several): not while this process reports one and ends.
        torch_handler = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if raised_in(err, *LOADERS):
            fail(
                "a DataLoader worker process died, most likely killed by the kernel for want of memory "
                "(dmesg says): pass a smaller --data.num_workers (or --data.batch_size); "
                f"{resume_with(given)}"
            )
        if not in_collective(err):
            signal.signal(signal.SIGCHLD, torch_handler)
            raise
        # Most often the process that failed first printed why and this one lost it; a mistake in a
        # collective raises alike, so torch's own line goes with ours.
        reason = str(err).strip().partition("\n")[0]
        fail(
            f"this process stopped in a step it shares with the job's other processes ({reason}); "
            "where another process printed an error, that is the cause"
        )
    finally:
        folder.unlock()


def build(cli: type[CLI], args: list[str] | None) -> CLI:
    """``cli`` (``CLI`` or a subclass) made as ``python -m app`` makes it: it parses ``args`` and runs."""
    # No dump header: config.yaml starts with the config itself.
    defaults = {"default_config_files": [str(DEFAULTS)], "dump_header": None}
    # The parts that are programs of their own are commands too: `python -m app --help` lists them.
    others = [f"{name}, {summary} (python -m app {name} --help)" for name, summary in programs().items()]
    epilog = f"Other commands: {'; '.join(others)}." if others else None
    return cli(
        models.ImageClassifier,
        LightningDataModule,
        trainer_class=Trainer,
        parser_class=Parser,
        subclass_mode_data=True,
        auto_configure_optimizers=False,
        parser_kwargs={
            "dump_header": None,
            "epilog": epilog,
            **{command: defaults for command in commands_for(args)},
        },
        save_config_callback=RunConfig,
        save_config_kwargs={"overwrite": True},
        args=args,
    )


@functools.cache
def programs() -> dict[str, str]:
    """The optional parts of ``app/`` that are commands of their own (``app/NAME/command.py``), each
    with the first line of its docstring, read without importing it."""
    found = {}
    for command in sorted(Path(__file__).parent.glob("*/command.py")):
        text = command.read_text()
        doc = text.split('"""', 2)[1] if text.startswith('"""') else ""
        first = doc.strip().splitlines()[0] if doc.strip() else ""
        found[command.parent.name] = first.split(": ", 1)[-1].rstrip(".")
    return found


def commands_for(args: list[str] | None) -> dict[str, set[str]]:
    """The subcommands to build for ``args``, with what each leaves out: the one named first alone (each
    parser resolves every signature anew), all for ``python -m app --help`` or a misspelt one."""
    parts = [name for name in ("export", "lr_find", "shard") if hasattr(Trainer, name)]  # optional parts
    every = {**LightningCLI.subcommands(), **{name: {"model", "datamodule"} for name in parts}}
    given = sys.argv[1:] if args is None else args
    return {given[0]: every[given[0]]} if given and given[0] in every else every


def class_path(value: object) -> object:
    """The class a config value picks (``class_path``), or the value itself."""
    return value.get("class_path") if isinstance(value, Namespace) else value


def short(path: object) -> str:
    """The class name of a class path."""
    return str(path).rsplit(".", 1)[-1]


def check_logged(model: object, key: str | None, flag: str) -> None:
    """Refuse ``key`` (``flag``'s, if any) where ``model`` says which keys it logs and it is none of them."""
    monitorable = getattr(model, "monitorable", None)
    if monitorable is not None and key is not None and key not in monitorable:
        raise UsageError(f"{flag} {key} is never logged; the model logs {', '.join(monitorable)}")


def resume_with(args: list[str]) -> str:
    """``resume with: COMMAND (from LAST.CKPT)`` for a failed ``python -m app ARGS``."""
    resume = shlex.join(["python", "-m", "app", *without_ckpt_path(args), "--ckpt_path", "last"])
    run = folder.current()
    last = last_of(run) if run else None
    since = f"from {last}" if last and last.is_file() else "from the start: nothing was saved yet"
    return f"resume with: {resume} ({since})"


def without_ckpt_path(args: list[str]) -> list[str]:
    """``args`` less any ``--ckpt_path VALUE`` or ``--ckpt_path=VALUE``."""
    return [
        arg
        for before, arg in zip([None, *args], args, strict=False)
        if not (arg == "--ckpt_path" or arg.startswith("--ckpt_path=") or before == "--ckpt_path")
    ]


# workaround: wandb ends its run at exit, colour codes in a log file (0.31); gone when Lightning ends it
def finish_wandb() -> None:
    """End wandb's run now: at interpreter exit its closing lines reach a log file with colour codes."""
    if "wandb" in sys.modules:
        sys.modules["wandb"].finish()
