"""The parts of ``benchmarks.gpu_check`` about the training step: the template against the
hand-written loop, CUDA graphs against the loop run the same way, and where a step's time goes (the
profiler). Each part's time is budgeted from an H100's figures (:func:`budget`)."""

import json
import statistics
from dataclasses import dataclass, replace

import yaml

from benchmarks.__main__ import throughput
from benchmarks.gpu_parts import CONFIGS, DRY_BATCH, Check, Rows, gpu_tests

TRAIN_IMAGES = 55_000  # Fashion-MNIST's training split
# An H100's seconds (16 cores, torch 2.11, 2026-11-27) that the budgets are made of: a child's outside its
# epochs (start-up, the last save, exit), and compiling the graphed network, the first time and again
# from inductor's cache.
START = {"template": 22.0, "loop": 12.0}
COMPILE = (15.0, 5.0)
LOOP, GRAPHED_LOOP = "hand-written loop", "hand-written loop, cuda graphs"


@dataclass(frozen=True)
class Row:
    """A row of the comparison: the template's flags and the loop's, each run's epochs (the first left
    out; the rest at least 5 s of the loop's training at the H100's figures), and the H100's seconds
    per epoch of each side (the template's with its validation)."""

    net: str
    batch: int
    precision: str
    channels_last: bool
    epochs: int
    loop_s: float
    template_s: float

    @property
    def label(self) -> str:
        last = ", channels_last" if self.channels_last else ""
        return f"{self.net}, batch {self.batch}, {self.precision}{last}"

    def flags(self) -> list[str]:
        flags = [f"--model.net={self.net}", f"--data.batch_size={self.batch}"]
        flags += [f"--trainer.precision={self.precision}", f"--model.channels_last={self.channels_last}"]
        return [*flags, f"--trainer.max_epochs={self.epochs}", "--test_after_fit=false"]


# MnistCNN at 128 (launching kernels bounds a step): 4 timed epochs, 5.6 s at the H100's 39,300 img/s.
# FastCNN at 512 in bf16 and channels_last (arithmetic does): 15, 5.1 s at 161,700 img/s. Graphed: 6,
# 5.6 s at the goal's 1.5x the eager loop.
MNIST = Row("MnistCNN", 128, "32-true", False, 5, 1.40, 2.0)
FAST = Row("FastCNN", 512, "bf16-mixed", True, 16, 0.34, 0.75)
GRAPHED = Row("MnistCNN", 128, "32-true", False, 7, 0.93, 1.03)
ROUNDS = 3  # interleaved, the order reversed every other round

PICTURES = "app.pictures.callback.ValidationPictures"  # left out where listed (an optional part)
TQDM = "lightning.pytorch.callbacks.TQDMProgressBar"


def features_off() -> list[str]:
    """The template without its features: no logger (W&B), no validation pictures, no periodic
    ``last.ckpt``, and Lightning's TQDM bar at the same refresh rate for the template's Rich bar."""
    callbacks = yaml.safe_load((CONFIGS / "defaults.yaml").read_text())["trainer"]["callbacks"]
    kept = []
    for callback in callbacks:
        path = callback if isinstance(callback, str) else callback["class_path"]
        if path.endswith("ProgressBar"):
            rate = (
                (callback.get("init_args") or {}).get("refresh_rate", 1) if isinstance(callback, dict) else 1
            )
            callback = {"class_path": TQDM, "init_args": {"refresh_rate": rate}}
        if path != PICTURES:
            kept.append(callback)
    off = ["--trainer.logger=false", "--last_checkpoint.every_n_steps=0"]
    return [*off, f"--trainer.callbacks={json.dumps(kept)}"]


# Each comparison's sides: the template's flags beyond the row's, or None for the loop (True: graphed).
RATIO_SIDES = {LOOP: None, "template as users run it": [], "template, features off": features_off()}
GRAPH_SIDES = {GRAPHED_LOOP: True, "template, cuda graphs": ["--model.cuda_graphs=true"]}
GRAPH_LOGS = {"TORCH_LOGS": "recompiles,cudagraphs"}  # why a graph was skipped or recompiled, in the log


def budget(row: Row, sides: dict, rounds: int) -> float:
    """Seconds the comparison takes at the H100's figures."""
    total = 0.0
    for n in range(rounds):
        for flags in sides.values():
            template = isinstance(flags, list)
            graphed = flags is True or (template and "--model.cuda_graphs=true" in flags)
            epoch = row.template_s if template else row.loop_s
            total += START["template" if template else "loop"] + row.epochs * epoch
            total += COMPILE[min(n, 1)] if graphed else 0.0
    return total


def dry_row(row: Row) -> Row:
    return Row(row.net, DRY_BATCH, row.precision, row.channels_last, 2, row.loop_s, row.template_s)


def ratios(check: Check, rows: Rows) -> None:
    """MnistCNN at 128: the template as users run it, and with its features off, against the loop."""
    compare(check, rows, dry_row(MNIST) if check.dry else MNIST, RATIO_SIDES, 1 if check.dry else ROUNDS)


def ratios_fast(check: Check, rows: Rows) -> None:
    """FastCNN at 512, bf16, channels_last: as :func:`ratios`."""
    compare(check, rows, dry_row(FAST) if check.dry else FAST, RATIO_SIDES, 1 if check.dry else ROUNDS)


def cuda_graphs(check: Check, rows: Rows) -> str | None:
    """``--model.cuda_graphs true`` against the loop graphed the same way (``GraphedNet``), MnistCNN at
    128, 2 rounds; what torch.compile did in each run (frames compiled, graph breaks, graph skips).
    Beside it, the ratio to the eager loop of the ratios part, where it ran."""
    if check.dry:
        return "skipped: CUDA graphs need CUDA"
    compare(check, rows, GRAPHED, GRAPH_SIDES, 2, env=GRAPH_LOGS)
    eager = check.medians.get((GRAPHED.label, LOOP))
    for _, figures in rows:
        if eager:
            figures["/ eager loop"] = figures["img/s"] / eager
    uncompiled = [label.split(": ")[-1] for label, figures in rows if not figures.get("frames compiled")]
    if uncompiled:
        return f"nothing compiled in: {', '.join(uncompiled)}"
    skipped = sum(figures["cudagraph skips"] for _, figures in rows)
    return f"graphs skipped {skipped} times: why, in the logs (TORCH_LOGS=cudagraphs)" if skipped else None


def interleaved(sides: list[str], rounds: int) -> list[list[str]]:
    """Each round's order of ``sides``: reversed every other round, so that no side always runs first."""
    return [sides if n % 2 == 0 else sides[::-1] for n in range(rounds)]


def compare(check: Check, rows: Rows, row: Row, sides: dict, rounds: int, env: dict | None = None) -> None:
    """Each side of ``row`` (the first, the reference) timed alike (:class:`EpochClock`) in ``rounds``
    interleaved rounds, the order reversed every other round. The rows are rewritten after each round,
    so that a part stopped by its limit keeps the rounds it finished; each child's seconds go to a
    table (what the next budget is made from)."""
    measured: dict[str, list[dict]] = {side: [] for side in sides}
    runs: list[list] = []
    check.tables.append(("each run", ["round", "side", "wall s", "timed s", "img/s"], runs))
    for n, order in enumerate(interleaved(list(sides), rounds)):
        for side in order:
            flags = sides[side]
            if isinstance(flags, list):
                record = check.fit(f"r{n}", "fashion_mnist.yaml", *row.flags(), *flags, env=env)
            else:
                record = check.loop(row, graphs=bool(flags), env=env)
            record = throughput(record)
            measured[side].append(record)
            timed = sum(record["train_seconds"][1:])
            runs.append(
                [n, side, f"{record['wall_seconds']:.1f}", f"{timed:.2f}", f"{record['img_per_s']:.0f}"]
            )
        rows[:] = ratio_rows(check, row, measured)


def ratio_rows(check: Check, row: Row, measured: dict[str, list[dict]]) -> Rows:
    """A line per side, the reference's first: its median img/s, the spread (max - min, % of the
    median), its median ratio to the reference with the lowest and highest round's, the shortest timed
    part, and what torch.compile did where it ran."""
    reference = [r["img_per_s"] for r in next(iter(measured.values()))]
    lines = []
    for i, (side, records) in enumerate(measured.items()):
        values = [r["img_per_s"] for r in records]
        middle = statistics.median(values)
        check.medians[row.label, side] = middle
        figures = {"img/s": middle, "spread %": 100 * (max(values) - min(values)) / middle}
        if i:
            each = [v / w for v, w in zip(values, reference, strict=False)]
            figures.update(
                {"/ ref": middle / statistics.median(reference), "min": min(each), "max": max(each)}
            )
        figures["timed s, least"] = min(sum(r["train_seconds"][1:]) for r in records)
        compiled = [r["compile"] for r in records if r.get("compile", {}).get("frames compiled")]
        for key in ("frames compiled", "graph breaks", "cudagraph skips") if compiled else ():
            figures[key] = max(counts[key] for counts in compiled)
        lines.append((f"{row.label}: {side}", {**figures, "rounds": len(values)}))
    return lines


def profiles(check: Check, rows: Rows) -> str | None:
    """About 20 steps of each loop under the profiler (``benchmarks/step_profile.py``), MnistCNN at
    batch 128 fp32: a row each with its figures, a table of each one's top CPU self time, a trace
    each (in the archive). The graphed template's row is dropped, and the status says so, where the
    profiler saw no graph launched in its window."""
    row = replace(dry_row(MNIST), epochs=3) if check.dry else MNIST  # dry: 4 steps an epoch
    warmup, steps = (3, 5) if check.dry else (30, 20)
    runs = {"template as users run it": [], LOOP: None}
    if not check.dry:
        runs["template, cuda graphs"] = GRAPH_SIDES["template, cuda graphs"]
    status = None
    for name, flags in runs.items():
        file = check.work / f"profile-{name.replace(', ', '-').replace(' ', '-')}.json"
        if flags is None:
            check.loop(row, profile=(file, warmup, steps))
        else:
            window = {"file": str(file), "warmup": warmup, "steps": steps}
            profiler = {"class_path": "benchmarks.step_profile.ProfileSteps", "init_args": window}
            flags = [*flags, f"--model.net={row.net}", f"--data.batch_size={row.batch}"]
            flags += ["--test_after_fit=false", f"--trainer.callbacks+={json.dumps(profiler)}"]
            check.fit("profile", "fashion_mnist.yaml", *flags, env=GRAPH_LOGS if "graphs" in name else None)
        record = json.loads(file.read_text())
        top = record.pop("top_cpu")
        if "graphs" in name and not record["graph launches/step"]:
            status = f"{name}: no graph launched in the profiled window, row dropped"
            continue
        rows.append((f"{row.label}: {name}", record))
        table = [[key, f"{us:.0f}", f"{calls:g}"] for key, us, calls in top]
        check.tables.append((f"{name}: top CPU self time", ["op", "µs/step", "calls/step"], table))
    return status


def step_tests(check: Check, rows: Rows) -> str | None:
    """The GPU tests of the step: no host sync between logging steps; CUDA graphs as accurate as eager."""
    tests = (
        "tests/test_gpu_training.py::test_no_host_sync_between_logging_steps_and_one_at_most_at_each",
        "tests/models/test_cuda_graphs.py",
    )
    return gpu_tests(check, rows, tests, "pytest, host syncs and CUDA graphs")
