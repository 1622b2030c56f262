"""The private name of torch the benchmarks read (see ``app/internals.py``)."""


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
