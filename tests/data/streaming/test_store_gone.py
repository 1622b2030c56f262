"""The S3 server goes away mid-epoch (killed, then started again on the same ports and data): training
stops with one error line naming the endpoint and the resume command; the resume is exact."""

import subprocess
import time

import pytest
from helpers.cli import app_command, app_env, callback, check, load_probe, max_difference, probe, run_process

from data.mnist import MNISTDataModule
from data.streaming.writer import shard

pytestmark = pytest.mark.distributed  # a process of its own, its server killed

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
    check(run_process("fit", *whole, cwd=tmp_path / "whole"))

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
    assert process.returncode == 1, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors == [stderr.strip().splitlines()[-1]], stderr[-3000:]
    assert errors[0].startswith(f"error: {URL}: the S3 endpoint {s3_server.endpoint} did not answer")
    assert "it stopped answering mid-run; once it is back, resume with: python -m app fit " in errors[0]
    assert errors[0].endswith(f" --ckpt_path last (from {last.relative_to(cut)})"), errors[0]
    assert waited < 60, waited  # LitData's client gives up after its retries; no hang

    resumed = run_process("fit", *args, "--ckpt_path=last", probe(tmp_path / "cut-probe"), cwd=cut)
    check(resumed)
    end, reference = load_probe(tmp_path / "cut-probe", "end", 0), load_probe(tmp_path / "whole", "end", 0)
    assert end["global_step"] == reference["global_step"] == 20
    assert max_difference(end["weights"], reference["weights"]) == 0
