"""The Trainer the CLI builds: Lightning's, with additions that show in ``--print_config``."""

from typing import Any

import lightning
from jsonargparse.typing import NonNegativeFloat, NonNegativeInt, PositiveInt
from lightning.pytorch.accelerators import CPUAccelerator
from lightning.pytorch.callbacks import ModelCheckpoint, ModelSummary, ProgressBar
from lightning.pytorch.plugins.layer_sync import LayerSync
from lightning.pytorch.utilities import rank_zero_info

from app.callbacks.last_checkpoint import LastCheckpoint
from app.distributed.preemption import forwarded_to_ranks


class Trainer(lightning.Trainer):
    """Lightning's Trainer, plus ``collective_timeout`` and what the optional parts below add.

    Some of Lightning's arguments are restated with the range the parser checks (outside it Lightning
    fails mid-run, or trains wrongly). A flag that turns a feature off drops the callbacks providing it,
    in one line.

    Args:
        collective_timeout: seconds a rank waits for the others in a collective, once training
            starts (the ``DistributedJob`` callback; until then: Lightning's 1800).
        sync_batchnorm: BatchNorm over the global batch; on CPU (gloo) too, unlike Lightning's.
        accumulate_grad_batches: batches whose gradients add up before each optimizer step (>= 1).
        check_val_every_n_epoch: validate every N training epochs (>= 1); None: only by
            ``val_check_interval``, which must then be a number of batches.
        log_every_n_steps: steps between the values sent to the loggers (0: none; None: 50).
        gradient_clip_val: clip gradients at this value (>= 0); None: no clipping.
        **kwargs: Lightning's other Trainer arguments.
    """

    def __init__(
        self,
        *args: Any,
        collective_timeout: PositiveInt = 300,
        sync_batchnorm: bool = False,
        accumulate_grad_batches: PositiveInt = 1,
        check_val_every_n_epoch: PositiveInt | None = 1,
        log_every_n_steps: NonNegativeInt | None = None,
        gradient_clip_val: NonNegativeFloat | None = None,
        **kwargs: Any,
    ):
        interval = kwargs.get("val_check_interval")
        # workaround: Lightning takes --trainer.val_check_interval 0, dividing by it (2.6); gone when refused
        if type(interval) is int and interval < 1:
            # Lightning refuses the other bad values itself; an int 0 would divide by zero mid-run.
            raise ValueError(
                "--trainer.val_check_interval must be a number of batches >= 1 "
                f"or a fraction of the epoch in [0.0, 1.0], got {interval}"
            )
        # A flag that turns a feature off takes the callbacks providing it out of the list (Lightning
        # would refuse the two together), and says so.
        flags = {"enable_progress_bar": (ProgressBar,), "enable_model_summary": (ModelSummary,)}
        flags["enable_checkpointing"] = (ModelCheckpoint, LastCheckpoint)
        callbacks = _as_list(kwargs.get("callbacks"))
        for flag, kinds in flags.items():
            dropped = [c for c in callbacks if kwargs.get(flag) is False and isinstance(c, kinds)]
            if dropped:
                names = ", ".join(type(c).__name__ for c in dropped)
                rank_zero_info(f"--trainer.{flag} false turns off {names}")
                callbacks = [c for c in callbacks if c not in dropped]
        if "callbacks" in kwargs:
            kwargs["callbacks"] = callbacks
        plugins = [*_as_list(kwargs.get("plugins"))]
        if sync_batchnorm and hasattr(self, "SyncBatchNormPlugin"):
            # Lightning's layer sync is torch's SyncBatchNorm, refusing CPU tensors.
            plugins.append(self.SyncBatchNormPlugin())
            kwargs["plugins"] = plugins
        if kwargs.get("strategy") == "dp" and hasattr(self, "DataParallelStrategy"):
            kwargs["strategy"] = self.DataParallelStrategy()  # Lightning 2 has no "dp" of its own
        self.collective_timeout, self.sync_batchnorm = collective_timeout, sync_batchnorm
        self.run_folder: str | None = None  # ROOT/NAME/version_N, where this run writes (set by the CLI)
        super().__init__(
            *args,
            sync_batchnorm=sync_batchnorm,
            accumulate_grad_batches=accumulate_grad_batches,
            check_val_every_n_epoch=check_val_every_n_epoch,
            log_every_n_steps=log_every_n_steps,
            gradient_clip_val=gradient_clip_val,
            **kwargs,
        )
        # A strategy's own check of the flags, now rather than when fit starts (``--trainer.strategy dp``).
        check_flags = getattr(self.strategy, "check_flags", None)
        if check_flags is not None:
            check_flags(self)
        unsynced = sync_batchnorm and not any(isinstance(plugin, LayerSync) for plugin in plugins)
        if unsynced and isinstance(self.accelerator, CPUAccelerator):
            raise ValueError(
                "--trainer.sync_batchnorm on CPU needs the template's SyncBatchNorm part "
                "(app/sync_batchnorm/), which this project was made without: add it back with copier "
                "update, or drop the flag"
            )

    def fit(self, *args: Any, **kwargs: Any) -> None:
        with forwarded_to_ranks(self):  # a SIGTERM to a ddp_spawn launcher reaches its ranks
            super().fit(*args, **kwargs)

    # The optional parts that plug into the Trainer, a line each (copier.yml): a method is a command.
    from app.dp import DataParallelStrategy  # app/dp/: --trainer.strategy dp
    from app.export import export  # app/export/: python -m app export
    from app.lr_find import lr_find  # app/lr_find/: python -m app lr_find
    from app.shard import shard  # app/shard/ (streaming): python -m app shard
    from app.sync_batchnorm import SyncBatchNormPlugin  # app/sync_batchnorm/: sync_batchnorm on CPU


def _as_list(value: object) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]
