"""``python -m app serve`` as a real process on 127.0.0.1, with real HTTP clients: 64 at once answered as
``predict`` answers, bad uploads refused while it keeps serving, SIGTERM answered to the last request."""

import asyncio
import csv
import shlex
import shutil
import signal
import subprocess
import sys
import threading

import httpx
import pytest
from helpers.cli import app_env, check, free_port, run_app
from helpers.image_files import png_header_only, write_image_files


def start(ckpt, cwd, *options: str) -> tuple[subprocess.Popen, str]:
    """The server process and the line it printed once it answers (a test fails after 180 s without)."""
    command = [sys.executable, "-m", "app", "serve", f"--ckpt_path={ckpt}", *options]
    server = subprocess.Popen(
        command, cwd=cwd, env=app_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watchdog = threading.Timer(180, server.kill)
    watchdog.start()
    line = server.stdout.readline()
    watchdog.cancel()
    assert line, f"the server printed nothing: {server.stderr.read()[-3000:]}"
    return server, line


async def post(url: str, bodies: list[bytes]) -> list[httpx.Response]:
    """Each body POSTed to ``url`` at once, each by its own connection."""
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=len(bodies))) as client:
        return await asyncio.gather(*(client.post(url, content=body) for body in bodies))


async def post_then_stop(url: str, bodies: list[bytes], server: subprocess.Popen) -> list[httpx.Response]:
    """Each body POSTed to ``url`` at once, and a SIGTERM to ``server`` once it holds them."""
    sending = asyncio.ensure_future(post(url, bodies))
    await asyncio.sleep(1.0)  # accepted, and waiting for their batch (--serve.batch_timeout)
    server.send_signal(signal.SIGTERM)
    return await sending


@pytest.mark.full
@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
def test_a_server_answers_as_predict_refuses_bad_uploads_and_stops_cleanly(backend, trained_here, tmp_path):
    if backend == "onnxruntime":
        pytest.importorskip("app.export", reason="the onnxruntime backend serves the export part's file")
    ckpt = trained_here / "checkpoints" / "last.ckpt"
    files = [path for seed in range(3) for path in write_image_files(tmp_path / "mine" / str(seed), seed)]
    check(run_app("predict", f"--ckpt_path={ckpt}", f"--data.predict_dir={tmp_path / 'mine'}", cwd=tmp_path))
    with open(trained_here / "predictions.csv", newline="") as f:
        expected = {row["file"]: (row["class_name"], float(row["probability"])) for row in csv.DictReader(f)}

    port = free_port()
    # Requests wait up to 2 s to be batched: the SIGTERM below comes while they wait.
    options = [f"--serve.port={port}", f"--serve.backend={backend}", "--serve.max_batch_size=64"]
    server, line = start(ckpt, tmp_path, *options, "--serve.batch_timeout=2")
    try:
        url = f"http://127.0.0.1:{port}/predict"
        assert url in line and line.count("\n") == 1
        if shutil.which("curl"):  # the command it prints works as printed
            tried = subprocess.run(shlex.split(line.split("try: ", 1)[1]), capture_output=True, text=True)
            assert tried.returncode == 0 and "class_name" in tried.stdout

        # 64 clients at once, each answered as predict answered for its file.
        chosen = [files[i % len(files)] for i in range(64)]
        responses = asyncio.run(post(url, [path.read_bytes() for path in chosen]))
        for path, response in zip(chosen, responses, strict=True):
            assert response.status_code == 200, response.text
            first = response.json()["predictions"][0]
            name, probability = expected[path.relative_to(tmp_path / "mine").as_posix()]
            assert (first["class_name"], first["probability"]) == (name, pytest.approx(probability, abs=2e-6))

        # Bad uploads, each beside a good one (at once: requests wait up to 2 s for their batch): each a
        # 4xx with one line of JSON, and the good ones served.
        jpeg = next(path for path in files if path.suffix == ".jpg").read_bytes()
        bad = [
            b"not an image",
            b"",
            jpeg[: len(jpeg) // 2],
            png_header_only(40_000, 40_000),
            b"\0" * 50 * 2**20,
        ]
        responses = asyncio.run(post(url, [*bad, *[files[0].read_bytes()] * len(bad)]))
        for refused in responses[: len(bad)]:
            assert 400 <= refused.status_code < 500 and "\n" not in refused.text and refused.json()["error"]
        assert [served.status_code for served in responses[len(bad) :]] == [200] * len(bad)

        # SIGTERM while 16 requests wait in the batcher: each is answered, then the server ends.
        responses = asyncio.run(post_then_stop(url, [path.read_bytes() for path in files[:16]], server))
        assert [response.status_code for response in responses] == [200] * 16
        assert server.wait(timeout=60) == 0
        stderr = server.stderr.read()
        assert "Traceback" not in stderr and stderr.rstrip().endswith("serve: stopped"), stderr[-3000:]
    finally:
        server.kill()
        server.wait()
