"""The parts of ``benchmarks.gpu_check`` about the training step: the template against the
hand-written loop, CUDA graphs against that loop, and where a step's time goes (the profiler)."""

import json
import math
import statistics

from benchmarks.__main__ import throughput
from benchmarks.gpu_parts import DRY_BATCH, DRY_VAL, Check, Rows, gpu_tests

# The template against the hand-written loop: MnistCNN at 128 (launching kernels bounds a step) and
# FastCNN at 512 in bf16 and channels_last (arithmetic does). Net, batch, precision, channels_last.
RATIO_ROWS = [("MnistCNN", 128, "32-true", False), ("FastCNN", 512, "bf16-mixed", True)]
ROUNDS, EPOCHS = 3, 3  # interleaved rounds; epochs a run, the first left out
TRAIN_IMAGES, SAVE_EVERY = 55_000, 500  # Fashion-MNIST's training split; last.ckpt's default interval
LOOP = "hand-written loop"
AS_USERS_RUN_IT = {"template as users run it": []}
CHECKPOINT_OFF = {"template, periodic checkpoint off": ["--last_checkpoint.every_n_steps=0"]}
GRAPHS = {"template, cuda graphs": ["--model.cuda_graphs=true"]}


def ratios(check: Check, rows: Rows) -> None:
    """The template as users run it, and with its periodic ``last.ckpt`` off where one falls within
    the run, against the hand-written loop (:func:`compare`)."""
    grid = [("FastCNN", DRY_BATCH, "bf16-mixed", True)] if check.dry else RATIO_ROWS
    variants = {}
    for row in grid:
        saves = EPOCHS * math.ceil(TRAIN_IMAGES / row[1]) >= SAVE_EVERY
        variants[row] = {**AS_USERS_RUN_IT, **(CHECKPOINT_OFF if saves or check.dry else {})}
    compare(check, rows, variants, 2 if check.dry else ROUNDS)


def cuda_graphs(check: Check, rows: Rows) -> str | None:
    """``--model.cuda_graphs true`` against the hand-written (eager) loop, MnistCNN at batch 128."""
    if check.dry:
        return "skipped: CUDA graphs need CUDA"
    compare(check, rows, {("MnistCNN", 128, "32-true", False): GRAPHS}, 2)
    return None


def compare(check: Check, rows: Rows, variants: dict[tuple, dict[str, list[str]]], rounds: int) -> None:
    """Each row's template runs (one a variant: its flags) and the hand-written loop, timed alike
    (:class:`EpochClock`), in ``rounds`` interleaved rounds. The rows are rewritten after each round,
    so that a part stopped by its limit keeps the rounds it finished."""
    measured: dict[tuple, dict[str, list[float]]] = {row: {} for row in variants}
    for n in range(rounds):
        for (net, batch, precision, channels_last), flagged in variants.items():
            runs = measured[net, batch, precision, channels_last]
            flags = [f"--model.net={net}", f"--data.batch_size={batch}", f"--trainer.precision={precision}"]
            flags += [f"--model.channels_last={channels_last}", f"--trainer.max_epochs={EPOCHS}"]
            for variant, extra in flagged.items():
                r = check.fit(f"r{n}", "fashion_mnist.yaml", *flags, *extra, "--test_after_fit=false")
                runs.setdefault(variant, []).append(throughput(r)["img_per_s"])
            _, text = check.child(loop_command(check, net, batch, precision, channels_last, EPOCHS))
            record = json.loads(text.strip().splitlines()[-1])
            runs.setdefault(LOOP, []).append(throughput(record)["img_per_s"])
        rows[:] = [line for row, runs in measured.items() for line in ratio_rows(row, runs)]


def loop_command(
    check: Check, net: str, batch: int, precision: str, channels_last: bool, epochs: int
) -> list[str]:
    """``benchmarks.plain_loop`` with a row's settings."""
    device = "cpu" if check.dry else "cuda"
    loop = ["-m", "benchmarks.plain_loop", f"--root={check.root}", f"--epochs={epochs}", f"--device={device}"]
    loop += [f"--batch-size={batch}", f"--net={net}", f"--precision={precision}"]
    loop += ["--channels-last"] if channels_last else []
    return loop + ([f"--val-size={DRY_VAL}"] if check.dry else [])


def label(row: tuple) -> str:
    net, batch, precision, channels_last = row
    return f"{net}, batch {batch}, {precision}{', channels_last' if channels_last else ''}"


def ratio_rows(row: tuple, runs: dict[str, list[float]]) -> Rows:
    """A row's lines, the loop's first: each variant's median img/s over the rounds, its spread
    (max - min, % of the median), and its median ratio to the loop with the lowest and highest
    round's ratio."""
    loop = runs[LOOP]
    lines = []
    for variant in [LOOP, *(v for v in runs if v != LOOP)]:
        values = runs[variant]
        middle = statistics.median(values)
        figures = {"img/s": middle, "spread %": 100 * (max(values) - min(values)) / middle}
        if variant != LOOP:
            each = [v / w for v, w in zip(values, loop, strict=False)]
            figures.update({"/ loop": middle / statistics.median(loop), "min": min(each), "max": max(each)})
        lines.append((f"{label(row)}: {variant}", {**figures, "rounds": len(values)}))
    return lines


def profiles(check: Check, rows: Rows) -> None:
    """About 20 steps of each loop under the profiler (``benchmarks/step_profile.py``), MnistCNN at
    batch 128 fp32: a row each with its figures, a table of each one's top CPU self time, a trace
    each into OUT."""
    row = ("MnistCNN", DRY_BATCH if check.dry else 128, "32-true", False)
    warmup, steps = (3, 5) if check.dry else (30, 20)
    runs = {"template as users run it": [], LOOP: None}
    if not check.dry:
        runs["template, cuda graphs"] = GRAPHS["template, cuda graphs"]
    folder = check.out or check.work
    for name, flags in runs.items():
        file = folder / f"profile-{name.replace(', ', '-').replace(' ', '-')}.json"
        if flags is None:
            command = loop_command(check, *row, epochs=3)
            check.child([*command, f"--profile={file}", "--profile-steps", str(warmup), str(steps)])
        else:
            window = {"file": str(file), "warmup": warmup, "steps": steps}
            profiler = {"class_path": "benchmarks.step_profile.ProfileSteps", "init_args": window}
            flags = [*flags, f"--model.net={row[0]}", f"--data.batch_size={row[1]}"]
            flags += ["--test_after_fit=false", f"--trainer.callbacks+={json.dumps(profiler)}"]
            check.fit("profile", "fashion_mnist.yaml", *flags)
        record = json.loads(file.read_text())
        top = record.pop("top_cpu")
        rows.append((f"{label(row)}: {name}", record))
        table = [[key, f"{us:.0f}", f"{calls:g}"] for key, us, calls in top]
        check.tables.append((f"{name}: top CPU self time", ["op", "µs/step", "calls/step"], table))


def step_tests(check: Check, rows: Rows) -> str | None:
    """The GPU tests of the step: no host sync between logging steps; CUDA graphs as accurate as eager."""
    tests = (
        "tests/test_gpu_training.py::test_no_host_sync_between_logging_steps_and_one_at_most_at_each",
        "tests/models/test_cuda_graphs.py",
    )
    return gpu_tests(check, rows, tests, "pytest, host syncs and CUDA graphs")
