"""The Trainer the CLI builds: Lightning's, with additions that show in ``--print_config``, and
callbacks that cost nothing at the batches they do nothing at."""

from pathlib import Path
from typing import Any, Literal

import lightning
from jsonargparse.typing import NonNegativeFloat, NonNegativeInt, PositiveInt
from lightning import LightningDataModule, LightningModule
from lightning.pytorch.callbacks import ModelCheckpoint, ModelSummary, ProgressBar

from app import export
from app.callbacks.last_checkpoint import LastCheckpoint
from app.distributed.sync_batchnorm import SyncBatchNormPlugin
from app.internals import skip_unused_batch_hooks
from app.runs import folder
from data.contract import provided


class Trainer(lightning.Trainer):
    """Lightning's Trainer, plus ``collective_timeout``, SyncBatchNorm on CPU and ``export``.

    Its callbacks' batch hooks that do nothing are not called (:func:`skip_unused_batch_hooks`; the CLI
    does the same for the model).

    A few of Lightning's arguments are restated with the range they need, which the parser checks:
    outside it Lightning fails with a traceback mid-run, or trains wrongly without a word. A flag that
    turns a feature off (``enable_checkpointing`` ...) also drops the listed callbacks that provide it,
    where Lightning would refuse the pair.

    Args:
        collective_timeout: seconds a rank waits for the others in a collective, from the first
            training step on, before the job fails; applied by the ``CollectiveTimeout`` callback
            (until that step, and without it: Lightning's 1800).
        sync_batchnorm: BatchNorm over the global batch; works on CPU (gloo) too, where Lightning's
            own refuses.
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
        if type(interval) is int and interval < 1:
            # Lightning refuses the other bad values itself; an int 0 would divide by zero mid-run.
            raise ValueError(
                "--trainer.val_check_interval must be a number of batches >= 1 "
                f"or a fraction of the epoch in [0.0, 1.0], got {interval}"
            )
        off = [ProgressBar] if kwargs.get("enable_progress_bar") is False else []
        off += [ModelSummary] if kwargs.get("enable_model_summary") is False else []
        off += [ModelCheckpoint, LastCheckpoint] if kwargs.get("enable_checkpointing") is False else []
        if off and "callbacks" in kwargs:
            kwargs["callbacks"] = [c for c in _as_list(kwargs["callbacks"]) if not isinstance(c, tuple(off))]
        if sync_batchnorm:
            # Lightning's own layer sync is torch's SyncBatchNorm, which refuses CPU tensors.
            kwargs["plugins"] = [*_as_list(kwargs.get("plugins")), SyncBatchNormPlugin()]
        self.collective_timeout = collective_timeout
        super().__init__(
            *args,
            sync_batchnorm=sync_batchnorm,
            accumulate_grad_batches=accumulate_grad_batches,
            check_val_every_n_epoch=check_val_every_n_epoch,
            log_every_n_steps=log_every_n_steps,
            gradient_clip_val=gradient_clip_val,
            **kwargs,
        )
        skip_unused_batch_hooks(self.callbacks)

    def export(
        self,
        model: LightningModule,
        datamodule: LightningDataModule | None = None,
        ckpt_path: str | None = None,
        format: Literal["onnx", "torchscript"] = "onnx",
        output: str | None = None,
        weights_only: bool | None = None,
    ) -> Path:
        """Write the network with a checkpoint's weights as an ONNX or TorchScript file.

        The file maps normalized images (batch, channels, size, size), float32, any batch size,
        to logits (batch, classes). Inputs are named ``images`` and outputs ``logits`` in ONNX. What the
        checkpoint knows of its data (class names, input shape, mean and std) goes in as JSON values:
        ONNX ``metadata_props``, TorchScript extra file ``data.json``.

        Args:
            model: the classifier, built from the run's config.
            datamodule: gives the images' channels and size.
            ckpt_path: the checkpoint whose weights are exported; None exports the model as built.
            format: ``onnx`` (needs onnx and onnxscript: ``pip install ".[export]"``) or ``torchscript``.
            output: the file to write; default ``model.onnx`` or ``model.pt`` in the run folder
                (``model-2.onnx``, ... where an earlier export wrote those).
            weights_only: load the checkpoint with torch's weights-only unpickler (None: Lightning's
                choice).

        Returns:
            The path written.
        """
        export.check_exporter(format)
        default = export.default_output(Path(self.default_root_dir), format)
        path = Path(output) if output else folder.unused(default)
        if ckpt_path is not None:
            checkpoint = self.strategy.load_checkpoint(ckpt_path, weights_only=weights_only)
            model.load_state_dict(checkpoint["state_dict"])
            model.on_load_checkpoint(checkpoint)  # its data card: class names, normalization
        sample = export.input_sample(provided(datamodule, "in_channels"), provided(datamodule, "image_size"))
        if self.is_global_zero:
            export.write(model, sample, path, format)
        return path

    def shard(self, model: LightningModule, datamodule: LightningDataModule, output: str) -> str:
        """Write the data's splits as LitData shards to ``output``, a folder or ``s3://bucket/prefix``
        (the streaming part: ``data/streaming``), for ``--data StreamingDataModule --data.root OUTPUT``."""
        from data.streaming.writer import shard

        return shard(datamodule, output)


def _as_list(value: object) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]
