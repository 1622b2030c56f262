"""The private names of Lightning, jsonargparse and torch.distributed this project reaches, one function each.

A name added here has no public counterpart in a release ``pyproject.toml`` allows; its comment names
the upstream request for one, and ``tests/app/test_internals.py`` checks that it still works, so a
release that renames it fails there, named, rather than in a user's run.
"""

from datetime import timedelta

import torch.distributed as dist
from lightning import Trainer


def set_collective_timeout(timeout: timedelta) -> None:
    """Set the default group's collective timeout after the group is made: ``torch.distributed.set_timeout``
    from torch 2.14, the private name it made public before (pytorch pull request 187387)."""
    (getattr(dist, "set_timeout", None) or dist.distributed_c10d._set_pg_timeout)(timeout)


def compile_counters() -> dict[str, int]:
    """What ``torch.compile`` did in this process so far: frames compiled (each recompilation adds one),
    graph breaks, and the CUDA graphs inductor skipped (``TORCH_LOGS=cudagraphs`` prints why). torch's
    ``torch._dynamo.utils.counters``, which its own benchmarks read; torch has no public counterpart
    (pytorch issue 149944 asks for the skip reasons in its public trace)."""
    import torch._dynamo.utils  # loaded with torch.compile's first use; importing it here costs nothing then

    counters = torch._dynamo.utils.counters
    return {
        "frames compiled": counters["frames"]["ok"],
        "graph breaks": sum(counters["graph_break"].values()),
        "cudagraph skips": counters["inductor"]["cudagraph_skips"],
    }


def spawns_ranks(trainer: Trainer) -> bool:
    """Whether ``trainer``'s launcher runs the ranks in processes it starts from this one (``ddp_spawn``,
    ``ddp_fork``, XLA) rather than being rank 0 itself: Lightning's ``_MultiProcessingLauncher``, which it
    names nowhere publicly. Its ``Tuner`` ends a range test with an exception that such a rank leaves
    uncaught (lightning issue 8983 reports ``lr_find`` under ``ddp_spawn`` failing)."""
    from lightning.pytorch.strategies.launchers.multiprocessing import _MultiProcessingLauncher

    return isinstance(trainer.strategy.launcher, _MultiProcessingLauncher)
