"""Fixtures of the tune part's tests: a real PostgreSQL server, and trials that import this checkout."""

import importlib.util

import pytest
from helpers.cli import app_env

if importlib.util.find_spec("optuna") is None:  # the tune extra is not installed
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def postgres():
    """PostgreSQL on 127.0.0.1 for the whole session (Debian's package: make test installs it)."""
    from helpers.postgres import PostgresServer

    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def trials_import_this_checkout(monkeypatch):
    """The trials a tune process starts import this checkout, and tests/ (test callbacks)."""
    monkeypatch.setenv("PYTHONPATH", app_env()["PYTHONPATH"])
    monkeypatch.setenv("PYTHONWARNINGS", "ignore")
