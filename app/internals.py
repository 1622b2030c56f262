"""Every use of a private name of Lightning, jsonargparse or argparse, each behind one small function.

None of these has a public counterpart in the versions ``pyproject.toml`` allows (lightning < 2.7,
jsonargparse < 4.54); each comment names the upstream attribute and why it is read or overridden. A
name renamed upstream breaks here, and the test named with it says which feature went with it. The rest
of the project goes through public APIs (LightningCLI's hooks, Trainer and Callback hooks, the
parser's methods), apart from one reliance that is not a name: ``app/parser.py`` reads the wording of
jsonargparse's error messages (there is no structured error), pinned by ``tests/app/test_bad_input.py``.
"""

import csv
from collections.abc import Iterable
from typing import Any

from lightning import Callback, LightningModule
from lightning.pytorch.callbacks import ModelCheckpoint, RichModelSummary
from lightning.pytorch.loggers import CSVLogger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.plugins.layer_sync import _BatchNormXd
from lightning.pytorch.strategies import ParallelStrategy


def option_names(parser: Any) -> list[str]:
    """Every option string of ``parser`` (``--model.net``...), for the names close to a misspelt one."""
    # argparse keeps a parser's actions only in ``ArgumentParser._actions``; neither argparse nor
    # jsonargparse lists them publicly. (tests/app/test_bad_input.py: "close: ...")
    return [option for action in parser._actions for option in action.option_strings]


def number_restrictions(number: type) -> tuple[list[tuple[str, int | float]], str] | None:
    """A jsonargparse restricted number type's comparisons (``[("gt", 0)]``) and how they join
    (``"and"``/``"or"``); None for any other type."""
    # jsonargparse.typing.restricted_number_type keeps them only as the class attributes
    # ``_restrictions`` (operator, reference) and ``_join``. (test_bad_input.py: "an integer > 0")
    if not hasattr(number, "_restrictions"):
        return None
    return [(op.__name__, ref) for op, ref in number._restrictions], number._join


class _AppendingWriter(ExperimentWriter):
    # Lightning's ExperimentWriter._check_log_dir_exists (called by its __init__) deletes metrics.csv
    # from a non-empty folder; this one reads the file's columns and adds to it.
    def _check_log_dir_exists(self) -> None:
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as f:
                self.metrics_keys = next(csv.reader(f), [])


def appending_csv_writer(logger: CSVLogger) -> ExperimentWriter:
    """``logger``'s writer, made on first use, which adds to an existing ``metrics.csv``."""
    # CSVLogger.experiment makes Lightning's writer into ``_experiment`` (on the filesystem ``_fs``), and
    # has no option to keep the file a resumed run logged before. (tests/app/runs/test_resume.py)
    if logger._experiment is None:
        logger._fs.makedirs(logger.root_dir, exist_ok=True)
        logger._experiment = _AppendingWriter(log_dir=logger.log_dir)
    return logger._experiment


def wandb_init_kwargs(logger: WandbLogger) -> dict[str, Any]:
    """The arguments Lightning's WandbLogger will pass to ``wandb.init``, to edit before it does."""
    # Lightning's WandbLogger keeps them in ``_wandb_init`` and always passes ``anonymous`` (wandb >= 0.19
    # warns on it) and the project/id even under a sweep agent (wandb warns it ignores them).
    return logger._wandb_init


def set_wandb_id(logger: WandbLogger, run_id: str) -> None:
    """Make ``logger.version`` ``run_id`` before its W&B run starts (a sweep agent's trial)."""
    # Lightning's WandbLogger.version reads ``_id`` until the run has started.
    logger._id = run_id


def started_wandb_run(logger: WandbLogger) -> Any:
    """The W&B run of ``logger`` if it has started, else None (``logger.experiment`` would start one)."""
    # Lightning's WandbLogger keeps it in ``_experiment``; its public ``experiment`` creates it on read.
    return logger._experiment


def layer_sync(strategy: ParallelStrategy) -> Any:
    """The layer sync (SyncBatchNorm) the Trainer gave ``strategy``, or None."""
    # The Trainer sets ParallelStrategy._layer_sync from sync_batchnorm; no public property reads it.
    return strategy._layer_sync


class ChecksFlagsWhenBuilt(ParallelStrategy):
    """A strategy whose ``check_flags`` runs while the Trainer is built, before any work."""

    # Strategy._configure_launcher is the last thing the Trainer's accelerator connector calls on a
    # strategy once it has set its devices and layer sync; there is no public hook at that point
    # (setup_environment runs only when fit starts). (tests/app/dp/test_strategy.py)
    def _configure_launcher(self) -> None:
        super()._configure_launcher()
        self.check_flags()

    def check_flags(self) -> None:
        """Raise for Trainer flags this strategy cannot honour; warn for those it ignores."""


class SummaryBuiltHere(RichModelSummary):
    """Lightning's Rich model summary callback, summarizing what :meth:`build_summary` returns."""

    # ModelSummary._summary is where the callback builds the summary it prints (on_fit_start then
    # reads it); it keeps max_depth only as ``_max_depth``. (tests/app/callbacks/test_defaults.py)
    def _summary(self, trainer: Any, pl_module: Any) -> Any:
        return self.build_summary(trainer, pl_module, self._max_depth)

    def build_summary(self, trainer: Any, pl_module: Any, max_depth: int) -> Any:
        """The ``ModelSummary`` (Lightning's utility) of ``pl_module`` to print."""
        raise NotImplementedError


# Lightning's layer_sync._BatchNormXd: the BatchNorm of any dimension its TorchSyncBatchNorm.revert turns
# a torch SyncBatchNorm back into; torch has no such public class. (tests/app/distributed/)
BatchNormXd = _BatchNormXd


# The hooks Lightning calls at every training batch, then at every evaluation or predict batch.
TRAIN_BATCH_HOOKS = (
    "on_train_batch_start",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_train_batch_end",
)
BATCH_HOOKS = (
    *TRAIN_BATCH_HOOKS,
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_test_batch_start",
    "on_test_batch_end",
    "on_predict_batch_start",
    "on_predict_batch_end",
)


def skip_unused_batch_hooks(hooked: Iterable[Callback | LightningModule]) -> None:
    """Set to None, on each callback or LightningModule, the batch hooks its class leaves as Lightning's
    no-ops (a module's training ones: Lightning reads the signatures of its evaluation ones), and
    ``ModelCheckpoint.on_train_batch_end`` where it saves neither every N steps nor by time.

    Lightning calls every batch hook of the module and of every callback at every batch, no-ops
    included, at a few microseconds a call (a profiler context, the callback's state key, setting the
    module's current hook name twice). Hooks the class or a base class of it defines are kept.
    """
    # Not a private name but a private behaviour: Lightning's _call_callback_hooks and
    # _call_lightning_module_hook (trainer/call.py) skip a hook that is not callable.
    # (tests/app/callbacks/test_batch_hooks.py reads its profiler report to catch a release that stops
    # doing so.)
    for obj in hooked:
        module = isinstance(obj, LightningModule)
        base, names = (LightningModule, TRAIN_BATCH_HOOKS) if module else (Callback, BATCH_HOOKS)
        for name in names:
            if getattr(type(obj), name, None) is getattr(base, name):
                setattr(obj, name, None)
        # ModelCheckpoint keeps its step and time triggers only as ``_every_n_train_steps`` and
        # ``_train_time_interval``; with neither, its on_train_batch_end returns at once (and costs more
        # than the others: its state key is a dict's repr). (test_batch_hooks.py)
        if isinstance(obj, ModelCheckpoint) and not _checks_at_batches(obj):
            obj.on_train_batch_end = None


def _checks_at_batches(checkpoint: ModelCheckpoint) -> bool:
    return checkpoint._every_n_train_steps >= 1 or checkpoint._train_time_interval is not None
