"""The command line: LightningCLI with our defaults and the data-to-model links."""

import itertools
import sys
import warnings
from pathlib import Path

from lightning import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar, RichProgressBar
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.core.datamodule import LightningDataModule
from lightning.pytorch.utilities.exceptions import MisconfigurationException

import models
from app.sync_batchnorm import SyncBatchNormPlugin
from data import DataError

# Lightning 2.6 on torch >= 2.10 warns about its own use of a torch internal; nothing for users to do.
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")


PROGRESS_EVERY_N_STEPS = 50


class UsageError(Exception):
    """A flag or config value that cannot work; the message says which."""


class CLI(LightningCLI):
    """``python -m app fit|validate|test|predict``; defaults: MNIST and MnistCNN."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.add_argument(
            "--test_after_fit", type=bool, default=True, help="Test the best checkpoint when fit ends."
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
            }
        )
        for key in ("in_channels", "num_classes", "image_size"):
            parser.link_arguments(f"data.{key}", f"model.net.init_args.{key}", apply_on="instantiate")
        parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")

    def instantiate_trainer(self, **kwargs) -> Trainer:
        config = self._get(self.config_init, "trainer")
        if config.get("sync_batchnorm"):
            # Trainer(sync_batchnorm=True) alone installs torch's SyncBatchNorm, which refuses CPU.
            kwargs["plugins"] = [*_as_list(config.get("plugins")), SyncBatchNormPlugin()]
        callbacks = _as_list(config.get("callbacks"))
        if config.get("enable_progress_bar") is not False and not any(
            isinstance(c, ProgressBar) for c in callbacks
        ):
            # Lightning's default bar redraws at every step: 12 ms, a quarter of a MnistCNN step on 2 cores.
            kwargs["callbacks"] = [*callbacks, RichProgressBar(refresh_rate=PROGRESS_EVERY_N_STEPS)]
        try:
            trainer = super().instantiate_trainer(**kwargs)
            # Checked by Lightning only at launch, after a traceback-prone start: check it now.
            environment = getattr(trainer.strategy, "cluster_environment", None)
            if environment is not None:
                environment.validate_settings(trainer.num_devices, trainer.num_nodes)
            return trainer
        except (MisconfigurationException, ValueError) as err:
            # Trainer flags this machine or launcher cannot honour: the user's to fix, not a bug.
            raise UsageError(" ".join(str(err).split())) from err

    def before_fit(self) -> None:
        # Settle the run folder in this process: under ddp_spawn each launch (fit, then test)
        # would otherwise pick the next free version and split one run in two folders.
        for logger in self.trainer.loggers:
            _ = logger.version

    def after_fit(self) -> None:
        if self.config.fit.test_after_fit:
            self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path="best")


def _as_list(value: object) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def with_run_config(args: list[str]) -> list[str]:
    """``validate|test|predict --ckpt_path RUN/checkpoints/X.ckpt`` also reads ``RUN/config.yaml``.

    So a checkpoint is evaluated with the network and data it was trained with; a ``--config``
    of the user's own turns this off.
    """
    if not args or args[0] not in ("validate", "test", "predict"):
        return args
    if any(arg in ("-c", "--config") or arg.startswith("--config=") for arg in args):
        return args
    paths = [b for a, b in itertools.pairwise(args) if a == "--ckpt_path"]
    paths += [arg.split("=", 1)[1] for arg in args if arg.startswith("--ckpt_path=")]
    config = Path(paths[-1]).parent.parent / "config.yaml" if paths else None
    return [args[0], f"--config={config}", *args[1:]] if config and config.is_file() else args


def main(args: list[str] | None = None) -> None:
    """Run the CLI; data problems end in one line on stderr and exit status 1."""
    args = with_run_config(sys.argv[1:] if args is None else args)
    try:
        CLI(
            models.ImageClassifier,
            LightningDataModule,
            subclass_mode_data=True,
            seed_everything_default=42,
            auto_configure_optimizers=False,
            trainer_defaults={
                "default_root_dir": "runs",
                "max_epochs": 10,
                "logger": {
                    "class_path": "lightning.pytorch.loggers.CSVLogger",
                    "init_args": {"save_dir": "runs", "name": ""},
                },
            },
            save_config_kwargs={"overwrite": True},
            args=args,
        )
    except (DataError, UsageError) as err:
        sys.exit(f"error: {err}")
