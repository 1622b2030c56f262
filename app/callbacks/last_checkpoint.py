"""``last.ckpt``: the newest state of a run, kept current so a kill or a pre-emption loses little."""

import random
import signal
import threading
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from jsonargparse.typing import NonNegativeInt
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException

from app.distributed.preemption import Agreement, stop
from app.runs.checkpoints import last_of
from app.runs.folder import run_folder

RNG_KEY = "rng_states"


class LastCheckpoint(Callback):
    """What a resume needs: ``RUN/checkpoints/last.ckpt`` kept current, with every rank's random state.

    Saved every ``every_n_steps`` steps, at each epoch end, and when a SIGTERM to any rank stops them
    all at one step end (a first Ctrl-C during fit counts as one, and so does a SIGUSR1, SLURM's warning
    before the time limit); not on other exceptions (a NaN loss).
    The step that ends an epoch saves, or stops, at that epoch's end, after its validation.
    Every checkpoint carries all ranks' random states, put back on resume (Lightning's ``save_last``
    saves only beside a best-k checkpoint, without them).

    Args:
        every_n_steps: steps between saves; 0 saves at epoch ends (and on SIGTERM) only.

    Attributes:
        stopped_by: the signal that stopped training this way (SIGINT for a Ctrl-C), received by this
            rank or another; 0 where none did. The CLI names it.
    """

    def __init__(self, every_n_steps: NonNegativeInt = 500) -> None:
        self.every_n_steps = every_n_steps
        self.saved_at = -1
        self.pending_rng: dict[str, Any] | None = None
        self.handlers_before: dict[int, Any] = {}  # of SIGINT, SIGTERM and SIGUSR1, while training
        self.received = self.stopped_by = 0  # signal numbers; 0: none
        self.agreement: Agreement | None = None  # with the other ranks, when there are any

    def save(self, trainer: Trainer) -> None:
        if trainer.sanity_checking or trainer.fast_dev_run or trainer.global_step == self.saved_at:
            return
        trainer.save_checkpoint(last_of(run_folder(trainer)), weights_only=False)
        self.saved_at = trainer.global_step

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        # workaround: pytorch-lightning issue 19815; gone when resuming an epoch's last batch counts it
        if batch_idx + 1 >= trainer.num_training_batches:
            # Left to the epoch's end: Lightning resumes a checkpoint of an epoch's last batch into an epoch
            # it does not count, and a second resume trains it again (pytorch-lightning issue 19815).
            return
        if self.every_n_steps and trainer.global_step % self.every_n_steps == 0:
            self.save(trainer)
        if signum := self._agreed():
            self._stop(trainer, signum)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.save(trainer)
        # This step's flags too: no rank's signal is left for an epoch that may not come.
        if signum := self._agreed(now=True):
            self._stop(trainer, signum)

    def _agreed(self, now: bool = False) -> int:
        """The signal that stops every rank here (0: none): this rank's own, or the ranks' agreement."""
        return self.received if self.agreement is None else self.agreement.poll(self.received, now)

    def _stop(self, trainer: Trainer, signum: int) -> None:
        # Saved here, not in on_exception: a rank that ddp_spawn started gets no on_exception.
        self.stopped_by = signum
        self.save(trainer)
        stop()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        self._restore_handlers()
        if isinstance(exception, SIGTERMException) and trainer.state.fn == "fit":
            self.save(trainer)

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        states = [collect_rng_states()]
        if dist.is_available() and dist.is_initialized() and trainer.world_size > 1:
            states = [None] * dist.get_world_size()
            dist.all_gather_object(states, collect_rng_states())
        checkpoint[RNG_KEY] = states

    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        states = checkpoint.get(RNG_KEY)
        if states and len(states) == trainer.world_size:
            self.pending_rng = states[trainer.global_rank]

    # workaround: Lightning acts on rank 0's SIGTERM only (2.6); gone when its signals agree across ranks
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # After everything set-up draws has drawn.
        if self.pending_rng is not None:
            restore_rng_states(self.pending_rng)
            self.pending_rng = None
        self.received = self.stopped_by = 0
        if trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
            # It waits for a rank that is gone as long as the job's other collectives do.
            seconds = getattr(trainer, "collective_timeout", None)
            self.agreement = Agreement(timedelta(seconds=seconds) if seconds else None)
        if threading.current_thread() is threading.main_thread():
            # Lightning's own SIGTERM handler acts on rank 0's signal only; its Ctrl-C handling stops
            # each rank where it is; its SLURM SIGUSR1 handler saves from inside the signal, out of step
            # with the other ranks' collectives. Here all three are noted, and the ranks agree at each
            # step end.
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
                self.handlers_before[signum] = signal.signal(signum, self._note)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._restore_handlers()
        if self.agreement is not None:
            self.agreement.finish()
            self.agreement = None

    def _restore_handlers(self) -> None:
        for signum, handler in self.handlers_before.items():
            signal.signal(signum, handler)
        self.handlers_before = {}

    def _note(self, signum: int, frame: object) -> None:
        if signum == signal.SIGINT:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C stops at once
        self.received = self.received or signum


def collect_rng_states() -> dict[str, Any]:
    """This process's generator states."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    # Tensors and plain values only, so the checkpoint still loads with torch.load(weights_only=True).
    numpy = [kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, gauss]
    states = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": numpy}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    """Put back what :func:`collect_rng_states` returned."""
    torch.set_rng_state(states["torch"])
    random.setstate(states["python"])
    kind, keys, position, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
