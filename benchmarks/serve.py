"""``python -m benchmarks.serve``: requests/s and latency of ``python -m app serve`` beside the model alone.

Two checkpoints, each fitted one step by ``python -m app fit`` on a generated image folder: MnistCNN on
28 x 28 grey images, ResNet-18 (torchvision's, not pretrained) on 224 x 224 RGB crops. Each server is a
``python -m app serve`` process on 127.0.0.1, with the torch or the onnxruntime backend, dynamic batching
on (``--serve.max_batch_size 32``) or off (1); 1, 8 and 32 clients (asyncio tasks of one httpx client in
this process, each sending its next image as soon as its answer comes) POST uploads at the training size
(PNG for MnistCNN, JPEG for ResNet-18) for ``--seconds`` each. The limit is the same model in this
process, on batches of the same images decoded and cropped beforehand (:class:`app.serve.api.ImageAPI`'s
``predict``, the server's own step), images/s at batch 1 and 32: a row's ratio is its requests/s over the
limit at batch 32 with batching (the most a batch holds), at batch 1 without. The client shares the
machine's cores with the server. Medians of ``--rounds`` rounds, the configurations' order reversed
every other round.
"""

import argparse
import asyncio
import io
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from benchmarks.common import count

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    # name: (fit flags, image size, grey)
    "MnistCNN": (["--model.net=MnistCNN", "--data.grayscale=true", "--data.image_size=28"], 28, True),
    "ResNet-18": (["--model.net=Backbone", "--model.net.name=resnet18", "--data.image_size=224"], 224, False),
}
CLIENTS = (1, 8, 32)


def images(size: int, grey: bool, n: int, seed: int = 0) -> list[Image.Image]:
    """``n`` images of ``size`` pixels square: noise with a bright square somewhere."""
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(n):
        pixels = rng.integers(0, 90, (size, size, 3), dtype=np.uint8)
        top, left = rng.integers(0, size // 2, 2)
        pixels[top : top + size // 2, left : left + size // 2] = 230
        found.append(Image.fromarray(pixels).convert("L" if grey else "RGB"))
    return found


def encoded(image: Image.Image, grey: bool) -> bytes:
    """The image as a file: PNG where grey, JPEG (quality 90) otherwise."""
    buffer = io.BytesIO()
    image.save(buffer, "PNG") if grey else image.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def checkpoint(name: str, folder: Path) -> Path:
    """A checkpoint of ``name`` fitted one step on a generated image folder of two classes."""
    flags, size, grey = MODELS[name]
    for label in range(2):
        (folder / "data" / "train" / str(label)).mkdir(parents=True)
        for i, image in enumerate(images(size, grey, 8, seed=label)):
            image.save(folder / "data" / "train" / str(label) / f"{i}.png")
    fit = [
        sys.executable,
        "-m",
        "app",
        "fit",
        "--data=ImageFolderDataModule",
        f"--data.root={folder / 'data'}",
    ]
    fit += [
        *flags,
        "--data.batch_size=4",
        "--data.crop_ratio=1",
        "--trainer.max_steps=1",
        "--test_after_fit=false",
    ]
    fit += [
        "--trainer.logger=false",
        f"--trainer.default_root_dir={folder}",
        "--trainer.enable_progress_bar=false",
    ]
    run(fit, folder)
    (ckpt,) = folder.rglob("last.ckpt")
    return ckpt


def run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, env=environment(), capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"error: {' '.join(command)} failed:\n{done.stderr[-2000:]}")


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}


class Server:
    """``python -m app serve`` on ``port`` while in a ``with`` block, ended by SIGTERM."""

    def __init__(self, ckpt: Path, port: int, backend: str, batching: bool) -> None:
        options = [f"--serve.port={port}", f"--serve.backend={backend}", "--serve.accelerator=cpu"]
        options += [f"--serve.max_batch_size={32 if batching else 1}"]
        self.command = [sys.executable, "-m", "app", "serve", f"--ckpt_path={ckpt}", *options]
        self.url = f"http://127.0.0.1:{port}/predict"

    def __enter__(self) -> "Server":
        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            self.command, env=environment(), stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        if not self.process.stdout.readline():
            self.fail()
        return self

    def fail(self) -> None:
        self.log.seek(0)
        sys.exit(f"error: {' '.join(self.command)} failed:\n{self.log.read()[-3000:]}")

    def __exit__(self, kind: type | None, *exc: object) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
        if kind is not None and issubclass(kind, Exception):
            self.fail()


async def load(url: str, bodies: list[bytes], clients: int, seconds: float) -> tuple[float, list[float], int]:
    """Answered requests/s, each answered request's latency (s), and the count of the others (LitServe's
    504 for a request queued past its timeout), of ``clients`` clients sending ``bodies`` in turn."""
    import httpx

    latencies: list[float] = []
    errors = 0

    async def client(k: int, until: float, timed: bool) -> None:
        nonlocal errors
        i = k
        while time.perf_counter() < until:
            start = time.perf_counter()
            response = await http.post(url, content=bodies[i % len(bodies)])
            if timed and response.status_code == 200:
                latencies.append(time.perf_counter() - start)
            elif timed:
                errors += 1
            i += clients

    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=clients)) as http:
        await asyncio.gather(
            *(client(k, time.perf_counter() + 1.0, False) for k in range(clients))
        )  # warm-up
        start = time.perf_counter()
        await asyncio.gather(*(client(k, start + seconds, True) for k in range(clients)))
        return len(latencies) / (time.perf_counter() - start), latencies, errors


def limits(ckpt: Path, backend: str, bodies: list[bytes], folder: Path, seconds: float) -> dict[int, float]:
    """Images/s of the served model's own step in this process, at batch 1 and 32, on ``bodies`` decoded
    and cropped beforehand."""
    from app.runs.checkpoints import data_card
    from app.serve.api import ImageAPI, onnx_export
    from app.serve.gate import Decoder

    card = data_card(str(ckpt))
    onnx = onnx_export(str(ckpt), folder) if backend == "onnxruntime" else None
    api = ImageAPI(str(ckpt), card, top_k=5, backend=backend, onnx_path=onnx, max_batch_size=32)
    api.pre_setup()
    api.setup("cpu")
    decode = Decoder(card, max_pixels=10**8)
    crops = [api.decode_request(decode(body)) for body in bodies]
    found = {}
    for batch in (1, 32):
        inputs = [api.batch([crops[(i + k) % len(crops)] for k in range(batch)]) for i in range(len(crops))]
        api.predict(inputs[0])  # warm-up
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            api.predict(inputs[done % len(inputs)])
            done += 1
        found[batch] = done * batch / (time.perf_counter() - start)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # ImageAPI.setup ignores Ctrl-C, as a worker
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=count, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="each measurement's length")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument(
        "--backends", nargs="+", choices=["torch", "onnxruntime"], default=["torch", "onnxruntime"]
    )
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    configs = [(m, b, batching) for m in args.models for b in args.backends for batching in (True, False)]
    served: dict[tuple, list[tuple[float, list[float], int]]] = {
        (*c, n): [] for c in configs for n in CLIENTS
    }
    alone: dict[tuple, list[float]] = {
        (m, b, n): [] for m in args.models for b in args.backends for n in (1, 32)
    }
    with tempfile.TemporaryDirectory() as tmp:
        ckpts = {name: checkpoint(name, Path(tmp) / name) for name in args.models}
        bodies = {
            m: [encoded(i, MODELS[m][2]) for i in images(MODELS[m][1], MODELS[m][2], 32)] for m in args.models
        }
        for r in range(args.rounds):
            for model, backend, batching in configs if r % 2 == 0 else configs[::-1]:
                if batching:  # the limit, once a round, while no server runs
                    found = limits(ckpts[model], backend, bodies[model], Path(tmp), args.seconds)
                    for batch, value in found.items():
                        alone[model, backend, batch].append(value)
                with Server(ckpts[model], args.port, backend, batching) as server:
                    for clients in CLIENTS:
                        result = asyncio.run(load(server.url, bodies[model], clients, args.seconds))
                        served[model, backend, batching, clients].append(result)
    print(
        f"torch {torch.__version__}, {os.cpu_count()} cores, {args.seconds:g} s a measurement, medians of ",
        end="",
    )
    print(f"{args.rounds} interleaved rounds (each round's requests/s at the end of its row)\n")
    print(
        "| model | backend | batching | clients | requests/s | p50 ms | p99 ms | limit img/s | / limit |",
        end="",
    )
    print(" rounds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, backend, batching in configs:
        for clients in CLIENTS:
            results = served[model, backend, batching, clients]
            rates = [rate for rate, _, _ in results]
            latencies = np.array([s for _, ls, _ in results for s in ls]) * 1000
            errors = sum(e for _, _, e in results)
            batch = min(clients, 32) if batching else 1
            limit = statistics.median(alone[model, backend, 32 if batch > 1 else 1])
            rate = statistics.median(rates)
            p50, p99 = np.percentile(latencies, 50), np.percentile(latencies, 99)
            print(
                f"| {model} | {backend} | {'on' if batching else 'off'} | {clients} | {rate:.0f} | "
                f"{p50:.1f} | {p99:.1f} | {limit:.0f} (batch {32 if batch > 1 else 1}) | "
                f"{rate / limit:.2f} | "
                f"{', '.join(f'{r:.0f}' for r in rates)} |"
                + (f" {errors} not answered (504) |" if errors else "")
            )


if __name__ == "__main__":
    main()
