"""A callback that writes down, for each training batch, the reads of device values on the host.

On a CPU there is no device to wait for, so each tensor is marked as a GPU would hold it: the batch,
the model's parameters and buffers, and whatever torch computes from them are device values; a tensor
made on the host (a Python number, a flag) is not. A read copies a device value to the host; it
*waits* where device work was queued since the previous read (on one CUDA stream, a stall of the
CPU); a read right after another finds the device idle.
"""

import json
import weakref
from pathlib import Path

import torch
from lightning import Callback, LightningModule, Trainer
from torch.overrides import TorchFunctionMode

# The Tensor methods that copy a value to the host (``to``, which on a CPU cannot tell the host from
# the device, is left out).
READS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "__format__", "numpy", "cpu"}


class DeviceValues(TorchFunctionMode):
    """Marks every tensor torch computes from a marked one; counts the reads of marked tensors."""

    def __init__(self, on_read) -> None:
        super().__init__()
        # By id, each with a weak reference: a tensor's == is elementwise, so no WeakSet.
        self.marked: dict[int, weakref.ref] = {}
        self.queued, self.on_read = False, on_read

    def mark(self, *tensors: torch.Tensor) -> None:
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self.marked[id(t)] = weakref.ref(t)

    def is_marked(self, t: torch.Tensor) -> bool:
        ref = self.marked.get(id(t))
        return ref is not None and ref() is t

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        inputs += [t for a in args if isinstance(a, (list, tuple)) for t in a if isinstance(t, torch.Tensor)]
        on_device = any(self.is_marked(t) for t in inputs)
        if on_device and name in READS:
            self.on_read(name, self.queued)
            self.queued = False
        out = func(*args, **kwargs)
        if on_device and name not in READS:
            made = [
                t for t in (out if isinstance(out, (list, tuple)) else [out]) if isinstance(t, torch.Tensor)
            ]
            self.queued |= _launches(name, inputs, made)
            self.mark(*made)
        return out


def _launches(name: str, inputs: list[torch.Tensor], made: list[torch.Tensor]) -> bool:
    """Whether an op queued device work: it wrote in place, or made a tensor of new memory (a view,
    ``detach`` or a same-type ``to`` make none)."""
    if name.endswith("_") and not name.startswith("__"):
        return True
    held = {t.untyped_storage().data_ptr() for t in inputs}
    return any(t.untyped_storage().data_ptr() not in held for t in made)


class HostReads(Callback):
    """Writes ``FILE``: for each training batch index, its reads of device values (method names) and
    how many of them waited, counted from one ``on_train_batch_start`` to the next (so a batch holds
    everything Lightning, the model and the callbacks did for it, logging included), and the global
    step after each batch.

    Args:
        file: the JSON file written when fit ends (by rank 0; rank N writes ``FILE.rankN.json``).
    """

    def __init__(self, file: str) -> None:
        self.file, self.batch, self.batches = Path(file), None, {}
        self.mode: DeviceValues | None = None

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.mode = DeviceValues(self._read)
        self.mode.mark(*pl_module.parameters(), *pl_module.buffers())
        self.mode.__enter__()

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, batch_idx: int):
        self.batch = batch_idx
        self.batches[batch_idx] = {"reads": [], "waits": 0, "step": None}
        self.mode.mark(*(batch if isinstance(batch, (list, tuple)) else [batch]))
        self.mode.queued = True  # the batch's own copy and transform

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx):
        self.batches[batch_idx]["step"] = trainer.global_step

    def _read(self, name: str, waited: bool) -> None:
        if self.batch is not None:
            self.batches[self.batch]["reads"].append(name)
            self.batches[self.batch]["waits"] += waited

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._leave()
        rank = trainer.global_rank
        path = self.file if rank == 0 else self.file.with_suffix(f".rank{rank}.json")
        path.write_text(json.dumps(self.batches))

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        self._leave()

    def _leave(self) -> None:
        if self.mode is not None:
            self.mode.__exit__(None, None, None)
            self.mode = None
