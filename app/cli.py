"""The command line: LightningCLI with our defaults, the data-to-model links and the run folder."""

import inspect
import itertools
import os
import sys
import warnings
from datetime import timedelta
from pathlib import Path

from lightning import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar, RichModelSummary, RichProgressBar
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.core.datamodule import LightningDataModule
from lightning.pytorch.strategies import StrategyRegistry
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import MisconfigurationException, SIGTERMException
from lightning.pytorch.utilities.rank_zero import rank_zero_only

import models
from app import loggers, run_folder
from app.checkpoint_io import AtomicCheckpointIO, CheckpointWriteError
from app.dp_strategy import DataParallelStrategy
from app.export import ExportTrainer
from app.finite_loss import FiniteLoss, LossNotFiniteError
from app.interruptions import CheckpointOnSigterm
from app.pictures import Pictures
from app.predictions import PredictionsWriter
from app.rng_states import RNGStates
from app.run_config import RunConfig
from app.sync_batchnorm import SyncBatchNormPlugin
from data import DataError

# Lightning 2.6 on torch >= 2.10 warns about its own use of a torch internal; nothing for users to do.
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
# A resumed run appends to its own metrics.csv; Lightning's warning about a non-empty folder is moot.
warnings.filterwarnings("ignore", message=r"Experiment logs directory .* exists and is not empty")
warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")

PROGRESS_EVERY_N_STEPS = 50


class UsageError(Exception):
    """A flag or config value that cannot work; the message says which."""


class CLI(LightningCLI):
    """``python -m app fit|validate|test|predict``; defaults: MNIST and MnistCNN."""

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
                "checkpoint.save_last": True,
                "checkpoint.enable_version_counter": False,
            }
        )
        for key in ("in_channels", "num_classes", "image_size"):
            parser.link_arguments(f"data.{key}", f"model.net.init_args.{key}", apply_on="instantiate")
        parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand]
        self.run = settle_run(config)

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
            callbacks += [RichProgressBar(refresh_rate=PROGRESS_EVERY_N_STEPS), RichModelSummary()]
        callbacks += [FiniteLoss(), RNGStates(), CheckpointOnSigterm(checkpoints)]
        if options.plots and not any(isinstance(c, Pictures) for c in callbacks):
            callbacks.append(Pictures())
        extra = []
        if config.get("enable_checkpointing") is not False:
            extra.append(options.checkpoint)
            if options.save_every_n_steps > 0:
                extra.append(
                    ModelCheckpoint(
                        checkpoints,
                        every_n_train_steps=options.save_every_n_steps,
                        save_top_k=0,
                        save_last=True,
                        enable_version_counter=False,
                    )
                )
        config["callbacks"] = callbacks
        config["strategy"] = with_timeout(config.get("strategy", "auto"), options.collective_timeout)
        try:
            trainer = self._instantiate_trainer(config, extra)
            # Checked by Lightning only at launch, after a traceback-prone start: check it now.
            environment = getattr(trainer.strategy, "cluster_environment", None)
            if environment is not None:
                environment.validate_settings(trainer.num_devices, trainer.num_nodes)
            return trainer
        except (MisconfigurationException, ValueError) as err:
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
        rank_zero_info(
            f"fit: {type(trainer.strategy).__name__}, world size {world} ({trainer.num_nodes} node(s) x "
            f"{trainer.num_devices} {device}), global batch {self.datamodule.batch_size * world}, "
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


def _short(class_path: str, suffix: str = "") -> str:
    name = class_path.rsplit(".", 1)[-1]
    return name.removesuffix(suffix) or name


def settle_run(config) -> Path:
    """Pick the run folder (and the checkpoint ``--ckpt_path last`` means), and point every output at it.

    ``fit`` makes a new ``ROOT/NAME/version_N``; a command given a checkpoint of a run works in that run.
    """
    rank_zero = rank_zero_only.rank == 0 and int(os.environ.get("NODE_RANK", 0)) == 0
    name = config.get("name") or "-".join(
        (_short(config.data.class_path, "DataModule"), _short(config.model.net.class_path))
    )
    parent = Path(config.trainer.default_root_dir or "runs") / name
    ckpt = config.get("ckpt_path")
    if ckpt == "last":
        found = run_folder.newest_intact(parent)
        if found is None:
            rank_zero_info(f"--ckpt_path last: no checkpoint under {parent} yet; starting from scratch")
        else:
            rank_zero_info(f"--ckpt_path last: resuming from {found}")
        ckpt = config.ckpt_path = str(found) if found else None
    elif ckpt:
        if not Path(ckpt).is_file():
            raise UsageError(f"--ckpt_path {ckpt}: no such file")
        if not run_folder.intact(Path(ckpt)):
            raise UsageError(
                f"--ckpt_path {ckpt} is not a complete checkpoint (cut short or corrupt); "
                "--ckpt_path last picks the newest intact one"
            )
    run = run_folder.inherited() or (run_folder.run_of(Path(ckpt)) if ckpt else None)
    if run is None:
        run = run_folder.claim_new(parent, create=rank_zero)
    elif rank_zero:
        if not os.access(run, os.W_OK):
            raise UsageError(f"the run folder {run} is not writable; fix its permissions")
        run_folder.remove_stale_temps(run)
    os.environ[run_folder.RUN_DIR_ENV] = str(run)
    config.trainer.default_root_dir = str(run)
    if "checkpoint" in config:
        config.checkpoint.dirpath = str(run / "checkpoints")
    loggers.configure(config.trainer.get("logger"), run, name, rank_zero)
    return run


def with_run_config(args: list[str]) -> list[str]:
    """``validate|test|predict --ckpt_path RUN/checkpoints/X.ckpt`` also reads ``RUN/config.yaml``.

    So a checkpoint is evaluated with the network and data it was trained with; a ``--config``
    of the user's own turns this off.
    """
    if not args or args[0] not in ("validate", "test", "predict", "export"):
        return args
    if any(arg in ("-c", "--config") or arg.startswith("--config=") for arg in args):
        return args
    paths = [b for a, b in itertools.pairwise(args) if a == "--ckpt_path"]
    paths += [arg.split("=", 1)[1] for arg in args if arg.startswith("--ckpt_path=")]
    run = run_folder.run_of(Path(paths[-1])) if paths and paths[-1] != "last" else None
    config = run / "config.yaml" if run else None
    return [args[0], f"--config={config}", *args[1:]] if config and config.is_file() else args


# Problems the user can fix: one line on stderr, exit status 1.
USER_ERRORS = (DataError, UsageError, LossNotFiniteError, CheckpointWriteError, run_folder.RunFolderError)


def main(args: list[str] | None = None) -> None:
    """Run the CLI; problems the user can fix end in one line on stderr and a non-zero exit."""
    if args is None:
        # Through sys.argv, which Lightning's ddp launcher passes on to the ranks it starts.
        sys.argv[1:] = with_run_config(sys.argv[1:])
    else:
        args = with_run_config(args)
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
    except SIGTERMException:
        run = os.environ.get(run_folder.RUN_DIR_ENV, "the run folder")
        sys.stderr.write(f"stopped by SIGTERM: saved {run}/checkpoints/last.ckpt; resume: --ckpt_path last\n")
        sys.exit(128 + 15)
