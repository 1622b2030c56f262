"""The Trainer's profiler when none is asked for: Lightning's pass-through, at less cost per call."""

from contextlib import nullcontext

from lightning.pytorch.profilers import PassThroughProfiler


# workaround: Lightning's default profiler costs a generator per hook (2.6); gone when it costs nothing
class NoProfiler(PassThroughProfiler):
    """Profiles nothing, as Lightning's default does; ``profile(name)`` is ``nullcontext(name)``.

    Lightning wraps every hook of every callback, of the module and of the strategy in ``profile()``:
    90 calls a training step with the default callbacks, each a generator-based context on Lightning's
    default (about 2 µs each on a 2-core VM; ``python -m benchmarks.step_overhead`` shows the step).
    Pass ``--trainer.profiler simple`` (or any Lightning profiler) to profile.
    """

    profile = staticmethod(nullcontext)  # type: ignore[assignment]
