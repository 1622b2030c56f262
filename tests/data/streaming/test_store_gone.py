"""The S3 server goes away (killed, then started again on the same ports and data) mid-epoch, after
training with the test split not yet read, and during predict: each run stops within seconds with one
error line naming the endpoint and the command that takes it up again, which works once it is back."""

import shlex
import subprocess
import time
from pathlib import Path

import pytest
from helpers.cli import (
    Result,
    app_command,
    app_env,
    callback,
    check,
    load_probe,
    max_difference,
    probe,
    run_app,
)

from data.mnist import MNISTDataModule
from data.streaming.writer import shard

pytestmark = [pytest.mark.distributed, pytest.mark.full]  # processes of their own, their server killed

# 540 training samples at batch 27, 3 chunks a batch (LitData fetches a few chunks ahead: the
# epoch's are not all fetched when the server goes): 20 steps, 0.2 s each; last.ckpt every 5.
URL = "s3://gone/mnist"
ARGS = [
    "--data=StreamingDataModule",
    f"--data.root={URL}",
    "--data.batch_size=27",
    "--data.num_workers=1",
    "--trainer.limit_train_batches=1.0",
    "--test_after_fit=false",
    "--last_checkpoint.every_n_steps=5",
]


@pytest.mark.full
def test_the_store_gone_mid_epoch_stops_with_one_line_and_resumes_exactly(
    mnist_root, s3_server, s3_env, tmp_path
):
    s3_server.client().create_bucket(Bucket="gone")
    shard(MNISTDataModule(root=str(mnist_root), val_size=100), URL, workers=1, chunk_size=9)
    whole = [*ARGS, f"--data.cache_dir={tmp_path / 'cache-whole'}", probe(tmp_path / "whole")]
    check(run_app("fit", *whole, cwd=tmp_path / "whole"))

    cut = tmp_path / "cut"
    args = [*ARGS, f"--data.cache_dir={tmp_path / 'cache-cut'}"]
    slow = callback("helpers.stops.SlowSteps", seconds=0.2, started=str(tmp_path / "started"))
    cut.mkdir()
    process = subprocess.Popen(
        app_command("fit", *args, slow), cwd=cut, env=app_env(), stderr=subprocess.PIPE, text=True
    )
    last = cut / "runs" / "Streaming-MnistCNN" / "version_0" / "checkpoints" / "last.ckpt"
    while not last.exists():  # step 5 saved: then the server goes
        assert process.poll() is None, process.stderr.read()[-3000:]
        time.sleep(0.05)
    s3_server.crash()
    crashed = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=120)
        waited = time.monotonic() - crashed
    finally:
        s3_server.start()
    (cut / "stderr").write_text(stderr)  # what the user saw, for a failure's report
    print(f"fit, mid-epoch: ended {waited:.1f} s after the server was killed")  # the README's figures
    assert process.returncode == 1, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors == [stderr.strip().splitlines()[-1]], stderr[-3000:]
    assert errors[0].startswith(f"error: {URL}: the S3 endpoint {s3_server.endpoint} did not answer")
    assert "it stopped answering mid-run; once it is back, resume with: python -m app fit " in errors[0]
    assert errors[0].endswith(f" --ckpt_path last (from {last.relative_to(cut)})"), errors[0]
    # A hang guard: LitData's client gives up after its retries (10 s each).
    assert waited < 60, f"fit hung {waited:.0f} s after the S3 server was killed mid-epoch"

    resumed = run_app("fit", *args, "--ckpt_path=last", probe(tmp_path / "cut-probe"), cwd=cut)
    check(resumed)
    end, reference = load_probe(tmp_path / "cut-probe", "end", 0), load_probe(tmp_path / "whole", "end", 0)
    assert end["global_step"] == reference["global_step"] == 20
    assert max_difference(end["weights"], reference["weights"]) == 0


def hold(hook: str, flag: Path) -> str:
    """The flag that holds a run at ``hook`` (once) until ``flag`` is deleted."""
    return callback("helpers.stops.HoldOnce", hook=hook, flag=str(flag))


def gone_while_held(s3_server, command: list[str], cwd: Path, flag: Path) -> tuple[str, float]:
    """Run ``command``; kill the server where it holds; its stderr and the seconds it took to end after.
    The server is started again after."""
    cwd.mkdir(exist_ok=True)
    process = subprocess.Popen(command, cwd=cwd, env=app_env(), stderr=subprocess.PIPE, text=True)
    while not flag.exists():
        assert process.poll() is None, process.stderr.read()[-3000:]
        time.sleep(0.05)
    s3_server.crash()
    crashed = time.monotonic()
    flag.unlink()
    try:
        _, stderr = process.communicate(timeout=300)
        waited = time.monotonic() - crashed
    finally:
        s3_server.start()
    (cwd / f"stderr-{command[3]}").write_text(stderr)  # what the user saw, for a failure's report
    print(f"{command[3]}: ended {waited:.1f} s after the server was killed")  # the README's figures
    assert process.returncode == 1, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors == [stderr.strip().splitlines()[-1]], stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    return errors[0], waited


def run_printed(line: str, marker: str, cwd: Path) -> Result:
    """Run the command that the error ``line`` gives after ``marker`` (in this process: what is tested is
    the command, the store's loss was the other process's)."""
    command = shlex.split(line.split(marker, 1)[1])
    assert command[:3] == ["python", "-m", "app"], line
    return run_app(*command[3:], cwd=cwd, shrink=False)


def test_the_store_gone_after_training_in_predict_and_validate_ends_within_seconds(
    mnist_root, s3_server, s3_env, tmp_path
):
    s3_server.client().create_bucket(Bucket="after")
    url = "s3://after/mnist"
    shard(MNISTDataModule(root=str(mnist_root), val_size=100), url, workers=1, chunk_size=9)
    args = [f"--data.root={url}", "--data.batch_size=27", "--data.num_workers=1"]
    args = [*args, f"--data.cache_dir={tmp_path / 'cache-fit'}"]  # 4 steps (SHRINK's), then the test

    # Training done, the test split never read: the test after it cannot start.
    cwd, held = tmp_path / "fit", tmp_path / "trained"
    fit = app_command("fit", "--data=StreamingDataModule", *args, hold("on_train_end", held))
    line, waited = gone_while_held(s3_server, fit, cwd, held)
    checkpoints = cwd / "runs" / "Streaming-MnistCNN" / "version_0" / "checkpoints"
    kept = {path.name: path.read_bytes() for path in checkpoints.iterdir()}
    gone = f"error: {url}: the S3 endpoint {s3_server.endpoint} did not answer within 10 s"
    assert line.startswith(gone)
    assert "training is complete (its checkpoints kept), only the test after it could not read" in line
    best = line.split("test with: python -m app test --ckpt_path ", 1)[1]
    assert Path(cwd, best).parent == checkpoints and Path(best).name in kept, line
    assert "last.ckpt" in kept
    # A hang guard: LitData's client retrying its index read took about 5 minutes.
    assert waited < 60, f"the test after fit hung {waited:.0f} s after the S3 server was killed"

    tested = run_printed(line, "test with: ", cwd)
    assert tested.returncode == 0, tested.stderr[-3000:]
    assert "test/acc" in tested.stdout + tested.stderr
    assert {path.name: path.read_bytes() for path in checkpoints.iterdir()} == kept

    # Predict after it read the split's index, before its first chunk; validate before it reads the
    # split (LitData fetches up to 32 of these small chunks ahead: all of a split's, once it starts).
    for subcommand, hook in (("predict", "on_predict_start"), ("validate", "setup")):
        held = tmp_path / subcommand
        again = app_command(
            subcommand,
            f"--ckpt_path={Path(cwd, best)}",
            f"--data.cache_dir={tmp_path / f'cache-{subcommand}'}",
            "--data.num_workers=0",
            hold(hook, held),
            shrink=False,
        )
        line, waited = gone_while_held(s3_server, again, cwd, held)
        assert line.startswith(gone)
        assert line.endswith(f"once it is back, run it again: python -m app {shlex.join(again[3:])}"), line
        assert waited < 60, f"{subcommand} hung {waited:.0f} s after the S3 server was killed"
        rerun = run_printed(line, "run it again: ", cwd)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
