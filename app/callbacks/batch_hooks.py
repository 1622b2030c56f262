"""Callbacks that cost nothing at the batches they do nothing at."""

from collections.abc import Iterable

from lightning import Callback

# The hooks Lightning calls at every training, validation, test or predict batch.
BATCH_HOOKS = (
    "on_train_batch_start",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_train_batch_end",
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_test_batch_start",
    "on_test_batch_end",
    "on_predict_batch_start",
    "on_predict_batch_end",
)


def skip_unused_batch_hooks(callbacks: Iterable[Callback]) -> None:
    """Set to None, on each callback, the batch hooks its class leaves as :class:`Callback`'s no-ops.

    Lightning calls every hook of every callback at every batch, no-ops included, at a few
    microseconds a call (a profiler context, the callback's state key); it skips a hook that is not
    callable. Hooks the callback's class or a base class of it defines are kept.
    """
    for callback in callbacks:
        for name in BATCH_HOOKS:
            if getattr(type(callback), name, None) is getattr(Callback, name):
                setattr(callback, name, None)
