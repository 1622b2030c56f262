"""Fixtures of the streaming part's tests: shards written once per session, and a real S3 server."""

import importlib.util
from pathlib import Path

import pytest
from helpers.cli import check, run_app
from helpers.s3_server import S3Server

if importlib.util.find_spec("litdata") is None:  # the streaming extra is not installed
    collect_ignore_glob = ["test_*.py"]

MNIST_SPLITS = {"train": 540, "val": 100, "test": 251}


@pytest.fixture(scope="session")
def s3_server():
    """SeaweedFS's S3 gateway on 127.0.0.1, over HTTPS, for the whole session; stopped after."""
    server = S3Server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """The AWS variables set for this test: in-process runs, and subprocesses started with app_env()."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server.env()


def shard(tmp: Path, *args: str) -> None:
    check(run_app("shard", *args, cwd=tmp, shrink=False))


@pytest.fixture(scope="session")
def mnist_shards(mnist_root, tmp_path_factory) -> Path:
    """The MNIST fixture's splits (540 train, 100 val, 251 test) as shards in a local folder."""
    tmp = tmp_path_factory.mktemp("mnist-shards")
    shard(
        tmp,
        "--data=MNISTDataModule",
        f"--data.root={mnist_root}",
        "--data.val_size=100",
        f"--output={tmp / 's'}",
    )
    return tmp / "s"
