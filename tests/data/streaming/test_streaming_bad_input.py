"""Bad input to ``shard`` and ``--data StreamingDataModule``: one ``error:`` line, exit 1, nothing written."""

import json
import shutil
import socket
import time

import pytest
from helpers.cli import run_app

FIT = ["--data=StreamingDataModule", "--test_after_fit=false"]


def error_line(result) -> str:
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ")
    return last


def shard(tmp, *args):
    return run_app("shard", *args, cwd=tmp, shrink=False)


def test_shard_of_a_folder_without_class_folders(tmp_path):
    (tmp_path / "photos" / "train").mkdir(parents=True)
    result = shard(
        tmp_path, "--data=ImageFolderDataModule", f"--data.root={tmp_path / 'photos'}", "--output=out"
    )
    assert "class folders" in error_line(result)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob("runs/*/*"))


def test_shard_to_an_unwritable_output(image_folder_root, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    output = tmp_path / "a-file" / "shards"
    result = shard(
        tmp_path, "--data=ImageFolderDataModule", f"--data.root={image_folder_root}", f"--output={output}"
    )
    assert (
        error_line(result)
        == f"error: cannot write shards to {output}: {tmp_path / 'a-file'} is not a writable folder"
    )


def test_shard_twice_refuses_and_leaves_the_shards_as_they_were(mnist_root, mnist_shards, tmp_path):
    before = {p: p.stat().st_mtime_ns for p in mnist_shards.rglob("*")}
    data = ["--data=MNISTDataModule", f"--data.root={mnist_root}", "--data.val_size=100"]
    result = shard(tmp_path, *data, f"--output={mnist_shards}")
    assert "is not empty: shard writes only to a new or empty location" in error_line(result)
    assert {p: p.stat().st_mtime_ns for p in mnist_shards.rglob("*")} == before


def test_fit_from_a_folder_without_shards(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_app("fit", *FIT, f"--data.root={tmp_path / 'empty'}", cwd=tmp_path)
    assert error_line(result).startswith(f"error: no shards in {tmp_path / 'empty'} (no streaming.json)")


@pytest.mark.parametrize("change", [{"version": 99}, {"format": "someone else's"}])
def test_fit_from_shards_of_another_format_or_version(change, mnist_shards, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(mnist_shards, copy)
    side = json.loads((copy / "streaming.json").read_text())
    (copy / "streaming.json").write_text(json.dumps({**side, **change}))
    result = run_app("fit", *FIT, f"--data.root={copy}", cwd=tmp_path)
    assert "holds shards of another format" in error_line(result)
    assert not list(tmp_path.glob("runs/*/*"))


def test_s3_bucket_that_does_not_exist(mnist_root, s3_env, tmp_path):
    data = ["--data=MNISTDataModule", f"--data.root={mnist_root}", "--data.val_size=100"]
    for result in (
        shard(tmp_path, *data, "--output=s3://no-such-bucket/x"),
        run_app("fit", *FIT, "--data.root=s3://no-such-bucket/x", cwd=tmp_path),
    ):
        assert "the bucket no-such-bucket does not exist" in error_line(result)


def test_s3_wrong_credentials(mnist_root, s3_server, s3_env, monkeypatch, tmp_path):
    s3_server.client().create_bucket(Bucket="guarded")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    data = ["--data=MNISTDataModule", f"--data.root={mnist_root}", "--data.val_size=100"]
    for result in (
        shard(tmp_path, *data, "--output=s3://guarded/x"),
        run_app("fit", *FIT, "--data.root=s3://guarded/x", cwd=tmp_path),
    ):
        assert "access denied" in error_line(result)
    assert s3_server.client().list_objects_v2(Bucket="guarded")["KeyCount"] == 0


def test_s3_shards_missing_in_an_existing_bucket(s3_server, s3_env, tmp_path):
    s3_server.client().create_bucket(Bucket="empty-bucket")
    result = run_app("fit", *FIT, "--data.root=s3://empty-bucket/nothing", cwd=tmp_path)
    assert error_line(result).startswith("error: no shards in s3://empty-bucket/nothing")


def test_s3_endpoint_that_does_not_answer(mnist_root, s3_env, monkeypatch, tmp_path):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        endpoint = f"https://127.0.0.1:{silent.getsockname()[1]}"
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        start = time.monotonic()
        result = run_app("fit", *FIT, "--data.root=s3://any/x", "--data.timeout=2", cwd=tmp_path)
        assert error_line(result) == (
            f"error: s3://any/x: the S3 endpoint {endpoint} did not answer within 2 s; "
            "check AWS_ENDPOINT_URL and that the server is up"
        )
        waited = time.monotonic() - start  # a hang guard, generous: --data.timeout is 2 s
        assert waited < 30, f"fit hung {waited:.0f} s on an S3 endpoint that never answers"


def test_s3_plain_http_endpoint(s3_env, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    result = run_app("fit", *FIT, "--data.root=s3://any/x", cwd=tmp_path)
    assert "is plain HTTP; LitData reads and writes shards over HTTPS only" in error_line(result)
