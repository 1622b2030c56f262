"""What the CLI changes in its own process when it starts; importing any module here changes nothing."""

import ctypes
import gc
import os
import signal
import sys

from app.errors import LOADERS, raised_in

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "LD_PRELOAD")


def prepare() -> None:
    """Tune the allocator and the garbage collector, quiet a dead loader worker's echoes, and ignore
    SIGUSR1 outside training."""
    keep_freed_memory()
    # What the imports made (torch's and Lightning's ~450,000 objects) lives until the exit: out of every
    # later collection, which walked it (on a 2-core VM 0.3 s of a fit's start, 1.1 s of each exit).
    gc.freeze()
    ignore_warning_signal()
    sys.unraisablehook = quiet_dead_workers


def keep_freed_memory() -> bool:
    """Stop glibc from handing each step's freed tensors back to the OS; False where not applied.

    glibc's trimming made CPU steps fault their activations in again (on 2 cores: 10x the page
    faults, epochs up to 24 % slower). The user's own settings (glibc variables, jemalloc) win.
    """
    if not sys.platform.startswith("linux") or any(name in os.environ for name in USER_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl, ...)
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(M_TRIM_THRESHOLD, 1 << 30))


# workaround: Lightning's SLURM SIGUSR1 handler saves out of step with the ranks (2.6); gone when optional
def ignore_warning_signal() -> None:
    """Ignore SIGUSR1 (SLURM's warning before the time limit) until training notes it (LastCheckpoint).

    Its default action kills the process, during start-up too; and Lightning, finding it unhandled under
    SLURM, installs a handler that saves and requeues from inside the signal, out of step with the other
    ranks' collectives. A handler already set (yours, or the batch script's) is kept.
    """
    if signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)


# workaround: torch's SIGCHLD handler raises again in a dead loader's __del__ (2.14); gone when once
def quiet_dead_workers(unraisable) -> None:
    """Print what ``__del__`` raised, unless it is a loader's worker gone: its line is the CLI's.

    torch's SIGCHLD handler raises again wherever the process is while a dead worker stays registered,
    a loader's ``__del__`` included, and Python prints that with a traceback.
    """
    if not raised_in(unraisable.exc_value, *LOADERS):
        sys.__unraisablehook__(unraisable)
