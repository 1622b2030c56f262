"""``python -m app serve``: a checkpoint behind an HTTP endpoint (LitServe), POST /predict an image file.

One line says where it listens, with a ``curl`` command to try; Ctrl-C or SIGTERM stop it once the requests
it accepted are answered.
"""

import contextlib
import dataclasses
import difflib
import functools
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from jsonargparse import ArgumentError, ArgumentParser
from jsonargparse.typing import NonNegativeFloat, PositiveFloat, PositiveInt
from PIL import Image

from app.errors import USER_ERRORS, UsageError, fail
from app.serve.api import Backend

PATH = "/predict"
NEEDS = ("in_channels", "image_size", "mean", "std")  # of the data card


@dataclass
class Options:
    """Serve a checkpoint with LitServe: POST an image file to /predict, get its top classes as JSON.

    Args:
        port: the port it listens on.
        host: the address it listens on: 127.0.0.1 (this machine alone) or 0.0.0.0 (every interface; in a
            container, with the port published: docker run -p 8000:8000).
        backend: ``torch`` runs the checkpoint; ``onnxruntime`` its network exported to ONNX when the server
            starts (a temporary file; needs the export extra), often faster on CPU.
        max_batch_size: requests predicted together at most (LitServe's dynamic batching); 1: one at a time.
        batch_timeout: seconds a batch waits for more requests before it runs.
        workers: inference processes per device, each with its copy of the model.
        accelerator: ``cpu``, ``cuda``, ``mps``, or ``auto`` (a GPU where there is one).
        devices: how many devices of the accelerator, or ``auto`` (all).
        top_k: classes in each answer, most likely first.
        max_upload_mb: larger uploads are refused (413).
        max_pixels: images with more pixels are refused (413), from their header, before decoding.
        api_servers: HTTP processes, each reading and decoding uploads; None: one per inference worker.
    """

    port: PositiveInt = 8000
    host: Literal["127.0.0.1", "0.0.0.0"] = "127.0.0.1"
    backend: Backend = "torch"
    max_batch_size: PositiveInt = 32
    batch_timeout: NonNegativeFloat = 0.005
    workers: PositiveInt = 1
    accelerator: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    devices: PositiveInt | Literal["auto"] = "auto"
    top_k: PositiveInt = 5
    max_upload_mb: PositiveFloat = 20.0
    max_pixels: PositiveInt = 40_000_000
    api_servers: PositiveInt | None = None


def parser() -> ArgumentParser:
    """``--ckpt_path`` and ``--serve.*``."""
    parser = ArgumentParser(prog="python -m app serve", description=__doc__, exit_on_error=False)
    parser.add_argument(
        "--ckpt_path", type=str, required=True, help="The checkpoint: RUN/checkpoints/FILE.ckpt."
    )
    parser.add_class_arguments(Options, "serve")
    return parser


def main(args: list[str]) -> None:
    """Run ``python -m app serve ARGS``; a problem the user can fix ends in one ``error:`` line first."""
    with tempfile.TemporaryDirectory(prefix="app-serve-") as folder:
        serve(args, Path(folder))


def serve(args: list[str], folder: Path) -> None:
    """Check ``args``, then serve until stopped; ``folder`` holds the example image and the ONNX file."""
    try:
        config = parser().parse_args(args)
        if config.ckpt_path is None:
            raise UsageError("serve needs a checkpoint: pass --ckpt_path RUN/checkpoints/FILE.ckpt")
        options = Options(**config.serve)
        server, line = build(config.ckpt_path, options, folder)
    except ArgumentError as err:
        fail(f"{err}{close_flags(args)}")
    except USER_ERRORS as err:
        fail(str(err))
    # Ours is the one line: LitServe's and uvicorn's info logs, and PIL's warning for a large image
    # (max_pixels refuses them first), are left out.
    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    # Ctrl-C and SIGTERM stop LitServe's run: it ends its HTTP processes, each answering what it accepted
    # (uvicorn's own handlers there), then the inference workers (which ignore Ctrl-C: ImageAPI.setup).
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, functools.partial(stop, os.getpid()))
    threading.Thread(target=announce, args=(options, line), daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        server.run(
            host=options.host,
            port=options.port,
            num_api_servers=options.api_servers,
            log_level="warning",
            generate_client_file=False,
        )
    sys.stderr.write("serve: stopped\n")


def close_flags(args: list[str]) -> str:
    """``; close: --FLAG`` for each flag in ``args`` that is none of serve's, where one is close to it."""
    known = ["--ckpt_path", "--help", *(f"--serve.{field.name}" for field in dataclasses.fields(Options))]
    given = [arg.split("=", 1)[0] for arg in args if arg.startswith("--")]
    close = [difflib.get_close_matches(flag, known, n=1) for flag in given if flag not in known]
    return "".join(f"; close: {match[0]}" for match in close if match)


def build(ckpt_path: str, options: Options, folder: Path) -> tuple[object, str]:
    """The LitServer of ``ckpt_path``, and the line that says where it listens; checked first. The
    example image (and the ONNX export) are written in ``folder``."""
    import litserve

    from app.serve.api import ImageAPI, onnx_export
    from app.serve.gate import Decoder, UploadGate

    card = checked_card(ckpt_path)
    check_devices(options.accelerator, options.devices)
    check_port(options.host, options.port)
    onnx_path = None
    if options.backend == "onnxruntime":
        onnx_path = onnx_export(ckpt_path, folder)
    api = ImageAPI(
        ckpt_path,
        card,
        options.top_k,
        options.backend,
        onnx_path,
        options.max_batch_size,
        options.batch_timeout,
    )
    decode = Decoder(card, options.max_pixels)
    gate = (UploadGate, {"decode": decode, "max_bytes": int(options.max_upload_mb * 2**20), "path": PATH})
    server = litserve.LitServer(
        api,
        accelerator=options.accelerator,
        devices=options.devices,
        workers_per_device=options.workers,
        middlewares=[gate],
        fast_queue=True,
    )
    example = write_example(card, folder / "example.png")
    url = f"http://127.0.0.1:{options.port}{PATH}"
    line = (
        f"serve: {ckpt_path} ({options.backend}) answers POST {url} with its top {options.top_k} classes; "
        f"try: curl --data-binary @{example} {url}"
    )
    return server, line


def checked_card(ckpt_path: str) -> dict:
    """The checkpoint's data card, with what serving needs; the network loads from it."""
    import models
    from app.runs.checkpoints import data_card, intact

    if not Path(ckpt_path).is_file():
        raise UsageError(f"--ckpt_path {ckpt_path}: no such file")
    not_one = f"--ckpt_path {ckpt_path} is not a checkpoint of this app: pass RUN/checkpoints/FILE.ckpt"
    if not intact(Path(ckpt_path)):
        raise UsageError(f"{not_one} (it is not torch's zip format, or it is cut short)")
    try:
        card = data_card(ckpt_path)
    except Exception as err:  # torch.load's errors for a zip that is no checkpoint are of many types
        raise UsageError(f"{not_one} ({type(err).__name__})") from err
    missing = [key for key in NEEDS if key not in card]
    if missing:
        raise UsageError(
            f"--ckpt_path {ckpt_path} does not know its data's {', '.join(missing)}: serve a checkpoint "
            "written by fit"
        )
    models.load(ckpt_path, "cpu")  # a network that does not load fails here, in one line, not in a worker
    return card


def check_devices(accelerator: str, devices: int | str) -> None:
    """Refuse an accelerator this machine lacks, or more of its devices than it has (LitServe would start
    no worker, or fail in one)."""
    import torch

    found = {"cuda": torch.cuda.device_count(), "mps": int(torch.backends.mps.is_available())}
    if accelerator in found and found[accelerator] == 0:
        raise UsageError(
            f"--serve.accelerator {accelerator}: this machine has none; pass --serve.accelerator cpu"
        )
    if accelerator in found and devices != "auto" and devices > found[accelerator]:
        raise UsageError(
            f"--serve.devices {devices}: this machine has {found[accelerator]} {accelerator} device(s); pass "
            "that many or fewer, or --serve.devices auto"
        )


def check_port(host: str, port: int) -> None:
    """Refuse a port another process listens on, before any worker starts."""
    with socket.socket() as probe:
        probe.setsockopt(
            socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
        )  # as uvicorn binds: closed ones do not count
        try:
            probe.bind((host, port))
        except OSError as err:
            raise UsageError(f"port {port} on {host}: {err.strerror}: pass another --serve.port") from err


def write_example(card: dict, path: Path) -> Path:
    """A grey image of the network's input size at ``path``, for the ``curl`` line to send."""
    mode = "L" if card["in_channels"] == 1 else "RGB"
    Image.new(mode, (card["image_size"], card["image_size"]), 128).save(path)
    return path


def announce(options: Options, line: str) -> None:
    """Print ``line`` once the server answers its health check."""
    health = f"http://127.0.0.1:{options.port}/health"
    while True:
        try:
            with urllib.request.urlopen(health, timeout=1) as response:
                if response.status == 200:
                    print(line, flush=True)
                    return
        except OSError:
            pass
        time.sleep(0.1)


def stop(main: int, signum: int, frame: object) -> None:
    """In this process, end LitServe's run; in its HTTP processes (forked with this handler), where uvicorn
    raises the signal again once it has answered every request, nothing more."""
    if os.getpid() == main:
        raise KeyboardInterrupt
