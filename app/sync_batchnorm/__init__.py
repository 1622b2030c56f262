"""Synchronized BatchNorm that also works on CPU (gloo), and the plugin ``--trainer.sync_batchnorm`` installs.

An optional part: without it, Lightning's own (torch's ``SyncBatchNorm``, CUDA only) is used.
"""

import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist
from lightning.pytorch.plugins.layer_sync import TorchSyncBatchNorm
from torch import Tensor, nn
from torch.distributed.nn.functional import all_reduce
from torch.nn.modules.batchnorm import _BatchNorm


class CPUSyncBatchNorm(_BatchNorm):
    """BatchNorm over the global batch of all processes, on CPU (gloo) as well as on CUDA.

    Plain BatchNorm in eval or alone; its state_dict keys are BatchNorm's.

    Args:
        process_group: the processes to synchronize; None for all of them.
    """

    def __init__(self, *args, process_group: dist.ProcessGroup | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input: Tensor) -> Tensor:
        """Normalize ``input`` of shape (N, C, *) with the statistics of all processes' batches."""
        if self.training and dist.is_available() and dist.is_initialized():
            group = self.process_group or dist.group.WORLD
            if dist.get_world_size(group) > 1:
                return self._synchronized(input, group)
        return super().forward(input)

    def _synchronized(self, input: Tensor, group: dist.ProcessGroup) -> Tensor:
        # Hand-written because torch's SyncBatchNorm refuses CPU (its kernels and DDP's check are GPU-only).
        self._check_input_dim(input)
        x = input.to(torch.promote_types(input.dtype, torch.float32))
        dims = [0, *range(2, x.dim())]
        count = torch.full((1,), input.numel() // input.size(1), dtype=x.dtype, device=x.device)
        with warnings.catch_warnings():  # torch >= 2.10 deprecates it; its replacement is private
            warnings.simplefilter("ignore", FutureWarning)
            stats = all_reduce(torch.cat([x.sum(dims), (x * x).sum(dims), count]), group=group)
        total, squares, n = stats.split([self.num_features, self.num_features, 1])
        mean = total / n
        var = squares / n - mean * mean  # biased: what normalizes
        if self.track_running_stats:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / self.num_batches_tracked.item() if self.momentum is None else self.momentum
            with torch.no_grad():
                unbiased = var * n / (n - 1)
                self.running_mean.mul_(1 - factor).add_(factor * mean.to(self.running_mean.dtype))
                self.running_var.mul_(1 - factor).add_(factor * unbiased.to(self.running_var.dtype))
        shape = [1, -1] + [1] * (x.dim() - 2)
        y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.weight is not None:
            y = y * self.weight.view(shape)
        if self.bias is not None:
            y = y + self.bias.view(shape)
        return y.to(input.dtype)


class BatchNormXd(_BatchNorm):
    """BatchNorm of any input dimension: what a synchronized layer of unknown origin reverts to."""

    def _check_input_dim(self, input: Tensor) -> None:
        pass


SYNCED = (nn.SyncBatchNorm, CPUSyncBatchNorm)


# workaround: torch's SyncBatchNorm refuses CPU tensors (torch 2.6-2.14); gone when it runs on gloo
class SyncBatchNormPlugin(TorchSyncBatchNorm):
    """``Trainer(sync_batchnorm=True)``'s layer sync, for CPU (gloo) processes as well as CUDA ones.

    Applied once the process group is joined: under NCCL torch's ``nn.SyncBatchNorm``, otherwise
    :class:`CPUSyncBatchNorm` (any device).
    """

    def apply(self, model: nn.Module) -> nn.Module:
        """Replace every plain BatchNorm layer of ``model`` with a synchronized one."""
        nccl = dist.is_available() and dist.is_initialized() and "nccl" in dist.get_backend()
        sync_cls = nn.SyncBatchNorm if nccl else CPUSyncBatchNorm
        return _swap(model, lambda m: m if isinstance(m, SYNCED) else _convert(m, sync_cls, type(m)))

    def revert(self, model: nn.Module) -> nn.Module:
        """Turn the synchronized layers back into the BatchNorm classes they came from."""
        return _swap(
            model, lambda m: _convert(m, getattr(m, "plain_cls", BatchNormXd)) if isinstance(m, SYNCED) else m
        )


def _convert(bn: _BatchNorm, cls: type[_BatchNorm], plain_cls: type | None = None) -> _BatchNorm:
    """A ``cls`` layer holding ``bn``'s parameters, buffers and mode (the same tensors)."""
    layer = cls(bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats)
    layer.weight, layer.bias = bn.weight, bn.bias
    layer.running_mean, layer.running_var = bn.running_mean, bn.running_var
    layer.num_batches_tracked = bn.num_batches_tracked
    if plain_cls is not None:
        layer.plain_cls = plain_cls
    return layer.train(bn.training)


def _swap(module: nn.Module, convert: Callable[[nn.Module], nn.Module]) -> nn.Module:
    """``convert`` applied to ``module``'s BatchNorm layers (itself included), in place where it can be."""
    for name, child in module.named_children():
        module.add_module(name, _swap(child, convert))
    return convert(module) if isinstance(module, _BatchNorm) else module
