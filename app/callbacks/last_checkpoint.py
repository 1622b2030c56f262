"""``last.ckpt``: the newest state of a run, kept current so a kill or a pre-emption loses little."""

import os
import signal
import threading
from typing import Any

import torch.distributed as dist
from jsonargparse.typing import NonNegativeInt
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException

from app.distributed.preemption import StopRequest, stop
from app.runs import rng_states
from app.runs.checkpoints import last_of

RNG_KEY = "rng_states"


class LastCheckpoint(Callback):
    """What a resume needs: ``RUN/checkpoints/last.ckpt`` kept current, with every rank's random state.

    ``last.ckpt`` is saved every ``every_n_steps`` training steps, at every epoch end, and when
    training stops for a SIGTERM; during fit, a first Ctrl-C (SIGINT) is handled as a
    SIGTERM, so it saves too (a second one stops at once). Every checkpoint (the best-k ones too) carries the
    random generator states of all ranks, put back when training resumes, so that dropout and
    augmentation draw what an uninterrupted run would.

    Lightning's ``ModelCheckpoint(save_last=True)`` rewrites ``last.ckpt`` at an epoch end only when
    a best-k checkpoint was saved there, and its OnExceptionCheckpoint saves on any exception (a NaN
    loss too). A SIGTERM to any rank stops all of them at the same step end, after the save
    (``app/distributed/preemption.py``); other exceptions save nothing and the files on disk stay good.

    Args:
        every_n_steps: steps between saves; 0 saves at epoch ends (and on SIGTERM) only.

    Attributes:
        stopped_by: ``"SIGINT"`` once a Ctrl-C has stopped training this way, else None.
    """

    def __init__(self, every_n_steps: NonNegativeInt = 500) -> None:
        self.every_n_steps = every_n_steps
        self.saved_at = -1
        self.pending_rng: dict[str, Any] | None = None
        self.sigint_before: Any = None
        self.stopped_by: str | None = None
        self.stop_request = StopRequest()

    def save(self, trainer: Trainer) -> None:
        if trainer.sanity_checking or trainer.fast_dev_run or trainer.global_step == self.saved_at:
            return
        trainer.save_checkpoint(last_of(trainer.default_root_dir), weights_only=False)
        self.saved_at = trainer.global_step

    def on_train_batch_end(self, trainer: Trainer, *_) -> None:
        if self.every_n_steps > 0 and trainer.global_step % self.every_n_steps == 0:
            self.save(trainer)
        self._stop_if_asked(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.save(trainer)
        self._stop_if_asked(trainer)

    def _stop_if_asked(self, trainer: Trainer) -> None:
        # Saved here, not in on_exception: a rank that ddp_spawn started gets no on_exception.
        if self.stop_request.agreed(trainer):
            self.save(trainer)
            stop()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        self._restore_sigint()
        if isinstance(exception, SIGTERMException) and trainer.state.fn == "fit":
            self.save(trainer)

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        states = [rng_states.collect()]
        if dist.is_available() and dist.is_initialized() and trainer.world_size > 1:
            states = [None] * dist.get_world_size()
            dist.all_gather_object(states, rng_states.collect())
        checkpoint[RNG_KEY] = states

    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        states = checkpoint.get(RNG_KEY)
        if states and len(states) == trainer.world_size:
            self.pending_rng = states[trainer.global_rank]

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # After everything set-up draws has drawn.
        if self.pending_rng is not None:
            rng_states.restore(self.pending_rng)
            self.pending_rng = None
        self.stopped_by = None
        self.stop_request.listen()
        if threading.current_thread() is threading.main_thread():
            self.sigint_before = signal.signal(signal.SIGINT, self._stop_as_if_sigterm)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._restore_sigint()

    def _restore_sigint(self) -> None:
        self.stop_request.close()
        if self.sigint_before is not None:
            signal.signal(signal.SIGINT, self.sigint_before)
            self.sigint_before = None

    def _stop_as_if_sigterm(self, signum: int, frame: object) -> None:
        # A SIGTERM stops every rank at the same step (they agree on it at each step end), so the
        # save's collectives meet; Lightning's own Ctrl-C handling stops each rank where it is.
        self.stopped_by = "SIGINT"
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.kill(os.getpid(), signal.SIGTERM)
