"""Where a training step's time goes: a few steps of a loop under ``torch.profiler``.

:class:`StepWindow` profiles ``steps`` steps after the first ``warmup`` (start-up, compilation and
CUDA-graph recording left out of the figures; the profiler runs from the first step, so that it sees
the graphs recorded before its window replayed within it) and writes one JSON file: wall and kernel
time per step (the GPU's idle share), GPU ops (kernels and copies) and CUDA-graph launches per step,
host syncs per step (``torch.cuda.set_sync_debug_mode("warn")``, its warnings counted; CUDA only),
step time p50/p90/max on the device's own clock, the top rows of CPU self time, and a gzipped Chrome
trace beside it. The template gets it as a callback (:class:`ProfileSteps`), the hand-written loop by
``benchmarks.plain_loop --profile FILE``.
"""

import gzip
import json
import shutil
import statistics
import time
import warnings
from pathlib import Path

import torch
from lightning import Callback, LightningModule, Trainer
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

TOP_ROWS = 8  # CPU self-time rows kept


class StepWindow:
    """Call :meth:`step_start` at each step's start; after ``warmup + steps + 1`` calls the file is
    written and :attr:`done` is true.

    Args:
        device: the loop's device.
        file: the JSON file written (the trace: the same name, ``.trace.json.gz``).
        warmup: steps before the window.
        steps: steps profiled.
    """

    def __init__(self, device: torch.device, file: str | Path, warmup: int = 30, steps: int = 20) -> None:
        self.cuda = device.type == "cuda"
        self.file, self.warmup, self.steps = Path(file), warmup, steps
        self.started, self.done = 0, False
        self.marks: list = []  # each window step's start: CUDA events, or perf_counter seconds

    def step_start(self) -> None:
        self.started += 1
        if self.done:
            return
        if self.started == 1:
            activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if self.cuda else [])]
            # Recording only the window's steps, after `warmup` steps with the profiler ready.
            plan = schedule(wait=0, warmup=self.warmup, active=self.steps, repeat=1)
            self.profiler = profile(activities=activities, schedule=plan)
            self.profiler.start()
        else:
            self.profiler.step()
        if self.started <= self.warmup:
            return
        if self.started == self.warmup + 1:
            self._open()
        if self.cuda:
            self.marks.append(torch.cuda.Event(enable_timing=True))
            self.marks[-1].record()
        else:
            self.marks.append(time.perf_counter())
        if self.started == self.warmup + self.steps + 1:
            self._close()

    def abandon(self) -> str:
        """Stop a profiler whose window was not reached (a process exiting with it running crashes);
        the reason, one line."""
        if self.started:
            self.profiler.stop()
        return f"error: the run ended after {self.started} steps, before the profile's window ended"

    def _open(self) -> None:
        self.caught = warnings.catch_warnings(record=True)
        self.warned = self.caught.__enter__()
        warnings.simplefilter("always")
        if self.cuda:
            torch.cuda.set_sync_debug_mode("warn")
        self.wall_start = time.perf_counter()

    def _close(self) -> None:
        if self.cuda:
            torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()  # the window's work done: its wall time
        wall = time.perf_counter() - self.wall_start
        self.caught.__exit__(None, None, None)
        syncs = sum(issubclass(w.category, UserWarning) for w in self.warned)
        self.profiler.stop()
        self.done = True
        if self.cuda:
            ms = [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        else:
            ms = [1000 * (b - a) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        events = self.profiler.events()
        device_ops = [e for e in events if e.device_type == DeviceType.CUDA]
        # The CUDA runtime call that replays a graph, one a replay.
        launches = sum(e.name.startswith("cudaGraphLaunch") for e in events)
        kernel_ms = sum(e.time_range.elapsed_us() for e in device_ops) / 1000
        n = self.steps
        wall_ms = 1000 * wall / n
        record = {
            "wall ms/step": wall_ms,
            "kernel ms/step": kernel_ms / n if self.cuda else "n/a",
            "GPU idle %": 100 * (1 - kernel_ms / n / wall_ms) if self.cuda else "n/a",
            "GPU ops/step": len(device_ops) / n if self.cuda else "n/a",
            "graph launches/step": launches / n if self.cuda else "n/a",
            "syncs/step": syncs / n if self.cuda else "n/a",
            "step p50 ms": statistics.median(ms),
            "step p90 ms": statistics.quantiles(ms, n=10, method="inclusive")[-1] if len(ms) > 1 else ms[0],
            "step max ms": max(ms),
        }
        rows = sorted(self.profiler.key_averages(), key=lambda a: a.self_cpu_time_total, reverse=True)
        record["top_cpu"] = [[row.key, row.self_cpu_time_total / n, row.count / n] for row in rows[:TOP_ROWS]]
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.file.write_text(json.dumps(record, indent=1))
        trace = self.file.with_suffix(".trace.json")
        self.profiler.export_chrome_trace(str(trace))
        with open(trace, "rb") as raw, gzip.open(f"{trace}.gz", "wb") as packed:
            shutil.copyfileobj(raw, packed)
        trace.unlink()


class ProfileSteps(Callback):
    """:class:`StepWindow` over a template run's training steps; stops the fit once written.

    Args:
        file: the JSON file written.
        warmup: steps before the window.
        steps: steps profiled.
    """

    def __init__(self, file: str, warmup: int = 30, steps: int = 20) -> None:
        self.file, self.warmup, self.steps = file, warmup, steps

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.window = StepWindow(pl_module.device, self.file, self.warmup, self.steps)

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, batch_idx) -> None:
        self.window.step_start()
        if self.window.done:
            trainer.should_stop = True

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not self.window.done:
            raise SystemExit(self.window.abandon())
