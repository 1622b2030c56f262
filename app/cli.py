"""The command line: LightningCLI with our defaults, the data-to-model links and the run folder."""

import inspect
import os
import sys
import warnings
from datetime import timedelta

from jsonargparse import ActionConfigFile
from lightning import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar, RichModelSummary
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.core.datamodule import LightningDataModule
from lightning.pytorch.strategies import StrategyRegistry
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import MisconfigurationException, SIGTERMException

import models
from app import run_folder
from app.checkpoint_io import AtomicCheckpointIO, CheckpointWriteError
from app.dp_strategy import DataParallelStrategy
from app.errors import RunFolderError, UsageError
from app.export import ExportTrainer
from app.finite_loss import FiniteLoss, LossNotFiniteError
from app.last_checkpoint import LastCheckpoint
from app.parser import Parser
from app.pictures import Pictures
from app.predictions import PredictionsWriter
from app.progress_bar import ThrottledRichProgressBar
from app.rng_states import RNGStates
from app.run_config import RunConfig
from app.stop_ranks import StopRanksOnError
from app.sync_batchnorm import SyncBatchNormPlugin
from data import DataError

# Lightning 2.6 on torch >= 2.10 warns about its own use of a torch internal; nothing for users to do.
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
# A resumed run appends to its own metrics.csv; Lightning's warning about a non-empty folder is moot.
warnings.filterwarnings("ignore", message=r"Experiment logs directory .* exists and is not empty")
warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")

PROGRESS_EVERY_N_STEPS = 50


class CLI(LightningCLI):
    """``python -m app fit|validate|test|predict``; defaults: MNIST and MnistCNN."""

    def init_parser(self, **kwargs) -> LightningArgumentParser:
        parser = Parser(**kwargs)
        parser.add_argument(
            "-c", "--config", action=ActionConfigFile, help="A YAML config file (several stack)."
        )
        return parser

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
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
            "--plots",
            type=bool,
            default=True,
            help="Validation samples and confusion matrix to W&B/TensorBoard; RUN/plots/*.png after fit.",
        )
        parser.add_argument(
            "--save_every_n_steps",
            type=int,
            default=500,
            help="Also save last.ckpt every N training steps: a kill loses at most N (0: epoch ends only).",
        )
        parser.add_argument(
            "--collective_timeout",
            type=int,
            default=300,
            help="Seconds a ddp rank waits for the others before the job fails (torch's default: 1800).",
        )
        parser.set_defaults(
            {
                "data": {"class_path": "MNISTDataModule"},
                "model.net": {"class_path": "MnistCNN"},
                "checkpoint.monitor": "val/acc",
                "checkpoint.mode": "max",
                "checkpoint.filename": "best-epoch{epoch:02d}-step{step}",
                "checkpoint.auto_insert_metric_name": False,
                "checkpoint.save_last": False,  # last.ckpt: see --save_every_n_steps
                "checkpoint.enable_version_counter": False,
            }
        )
        for key in ("in_channels", "num_classes", "image_size"):
            parser.link_arguments(f"data.{key}", f"model.net.init_args.{key}", apply_on="instantiate")
        parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")

    def _parse_ckpt_path(self) -> None:
        # Lightning reads hyperparameters from --ckpt_path right after parsing: check the file first.
        subcommand = self.config.get("subcommand")
        ckpt = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt and ckpt != "last":
            run_folder.check_checkpoint(ckpt)
        super()._parse_ckpt_path()

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand]
        self.run = run_folder.settle(config)

    def instantiate_classes(self) -> None:
        try:
            super().instantiate_classes()
        except ValueError as err:
            # An argument a class rejects (ResNet depth 10): the user's to fix, not a bug.
            raise UsageError(" ".join(str(err).split())) from err

    def instantiate_trainer(self, **kwargs) -> Trainer:
        config = {**self._get(self.config_init, "trainer"), **kwargs}
        options = self.config_init[self.subcommand]
        checkpoints = str(self.run / "checkpoints")
        plugins = [*_as_list(config.get("plugins")), AtomicCheckpointIO()]
        if config.get("sync_batchnorm"):
            # Trainer(sync_batchnorm=True) alone installs torch's SyncBatchNorm, which refuses CPU.
            plugins.append(SyncBatchNormPlugin())
        config["plugins"] = plugins
        callbacks = _as_list(config.get("callbacks"))
        if config.get("enable_progress_bar") is not False and not any(
            isinstance(c, ProgressBar) for c in callbacks
        ):
            # Lightning's default bar redraws at every step: 12 ms, a quarter of a MnistCNN step on 2 cores.
            callbacks += [ThrottledRichProgressBar(refresh_rate=PROGRESS_EVERY_N_STEPS), RichModelSummary()]
        if options.plots and not any(isinstance(c, Pictures) for c in callbacks):
            callbacks.append(Pictures())
        # In this order: a NaN step is caught before anything saves it.
        callbacks += [FiniteLoss(), RNGStates(), StopRanksOnError()]
        extra = []
        if config.get("enable_checkpointing") is not False:
            callbacks.append(LastCheckpoint(checkpoints, options.save_every_n_steps))
            extra.append(options.checkpoint)
        config["callbacks"] = callbacks
        config["strategy"] = with_timeout(config.get("strategy", "auto"), options.collective_timeout)
        try:
            trainer = self._instantiate_trainer(config, extra)
            # Checked by Lightning only at launch, after a traceback-prone start: check it now.
            environment = getattr(trainer.strategy, "cluster_environment", None)
            if environment is not None:
                environment.validate_settings(trainer.num_devices, trainer.num_nodes)
            return trainer
        except (MisconfigurationException, ValueError, TypeError) as err:
            # Trainer flags this machine or launcher cannot honour: the user's to fix, not a bug.
            raise UsageError(" ".join(str(err).split())) from err

    def before_fit(self) -> None:
        # Settle the loggers' folders in this process: under ddp_spawn each launch (fit, then test)
        # would otherwise pick its own.
        for logger in self.trainer.loggers:
            _ = logger.version
        trainer, model = self.trainer, self.model
        dp = isinstance(trainer.strategy, DataParallelStrategy)
        world = 1 if dp else trainer.num_devices * trainer.num_nodes
        device = type(trainer.accelerator).__name__.removesuffix("Accelerator").lower()
        batch = getattr(self.datamodule, "batch_size", None)  # a DataModule of the user's may not say
        rank_zero_info(
            f"fit: {type(trainer.strategy).__name__}, world size {world} ({trainer.num_nodes} node(s) x "
            f"{trainer.num_devices} {device}), global batch {batch * world if batch else '?'}, "
            f"lr {model.scaled_lr(world):g}; run folder {self.run}"
        )

    def after_fit(self) -> None:
        summary = []
        best = next((c for c in self.trainer.checkpoint_callbacks if c.monitor), None)
        if best is not None and best.best_model_score is not None:
            summary.append(f"best {best.monitor} {best.best_model_score:.4f}")
        if self.config.fit.test_after_fit and not self.trainer.interrupted:
            ckpt = best.best_model_path if best is not None and best.best_model_path else "last"
            results = self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=ckpt)
            if results and "test/acc" in results[0]:
                summary.append(f"test/acc {results[0]['test/acc']:.4f}")
        rank_zero_info(f"done: {', '.join([*summary, f'run folder {self.run}'])}")

    def before_predict(self) -> None:
        self.trainer.callbacks.append(PredictionsWriter())

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        return {**LightningCLI.subcommands(), "export": {"model", "datamodule"}}


def _as_list(value: object) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def with_timeout(strategy: object, seconds: float) -> object:
    """A strategy named by a string, built with a collective timeout when it takes one (ddp, fsdp)."""
    if not isinstance(strategy, str) or strategy not in StrategyRegistry:
        return strategy
    entry = StrategyRegistry[strategy]
    if "timeout" not in inspect.signature(entry["strategy"]).parameters:
        return strategy
    return entry["strategy"](**{**entry["init_params"], "timeout": timedelta(seconds=seconds)})


# Problems the user can fix: one line on stderr, exit status 1.
USER_ERRORS = (DataError, UsageError, LossNotFiniteError, CheckpointWriteError, RunFolderError)


# What torch.distributed says when a peer process died or left: not this process's own error.
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


def main(args: list[str] | None = None) -> None:
    """Run the CLI; problems the user can fix end in one line on stderr and a non-zero exit."""
    if args is None:
        # Through sys.argv, which Lightning's ddp launcher passes on to the ranks it starts.
        sys.argv[1:] = run_folder.with_run_config(sys.argv[1:])
    else:
        args = run_folder.with_run_config(args)
    try:
        CLI(
            models.ImageClassifier,
            LightningDataModule,
            trainer_class=ExportTrainer,
            subclass_mode_data=True,
            seed_everything_default=42,
            auto_configure_optimizers=False,
            trainer_defaults={
                "default_root_dir": "runs",
                "max_epochs": 10,
                "logger": {
                    "class_path": "lightning.pytorch.loggers.WandbLogger",
                    "init_args": {"project": "lightning-cnn-template"},
                },
            },
            save_config_callback=RunConfig,
            save_config_kwargs={"overwrite": True},
            args=args,
        )
    except USER_ERRORS as err:
        sys.exit(f"error: {err}")
    except RuntimeError as err:
        if not any(sign in str(err) for sign in PEER_GONE):
            raise
        # The process that failed first printed why; this one only lost its peer.
        sys.exit("error: another process of this job failed (its error is above); this one stopped too")
    except SIGTERMException:
        run = os.environ.get(run_folder.RUN_DIR_ENV, "the run folder")
        sys.stderr.write(f"stopped by SIGTERM: saved {run}/checkpoints/last.ckpt; resume: --ckpt_path last\n")
        sys.exit(128 + 15)
