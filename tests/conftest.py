"""Fixtures: data sets written in their real on-disk formats, once per session.

How runs are made and shrunk is in ``helpers/cli.py``; the data writers in ``helpers/data_files.py``.
"""

import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers.data_files import write_cifar, write_image_folder, write_imbalanced_mnist, write_mnist

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
# What `make test` should take on a quiet 2-core machine: past it, a warning names the slowest tests.
FAST_TIER_MINUTES = 3
_started = time.monotonic()
_calls: list[tuple[float, str]] = []  # (seconds, test) of each test's call


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker (and the processes it starts) gets its share of the cores:
    two workers spinning two OpenMP threads each on two cores run several times slower."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests first, those that start several processes before the rest of the full tier: under
    pytest-xdist they then run beside the others, and the short ones fill the workers' last minutes,
    rather than a long one alone at the end. Those of an optional part that is not here skip."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("distributed") is None,
            item.get_closest_marker("full") is None,
        )
    )
    for item in items:
        for marker in item.iter_markers("part"):
            if not has_part(marker.args[0]):
                item.add_marker(pytest.mark.skip(reason=f"the project was made without {marker.args[0]}"))


def has_part(module: str) -> bool:
    """Whether the optional part whose package is ``module`` (``data.image_folder``) is in this project."""
    return importlib.util.find_spec(module) is not None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _started
    _started = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _calls.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """After a run of the fast tier alone (`make test`): its total, and a warning, never a failure, when
    it outgrew FAST_TIER_MINUTES, naming its slowest tests (a test's outcome never depends on its time)."""
    if "not full" not in (config.getoption("markexpr") or ""):
        return
    minutes = (time.monotonic() - _started) / 60
    terminalreporter.write_line(f"fast tier: {minutes:.1f} min (its budget: {FAST_TIER_MINUTES} min)")
    if minutes <= FAST_TIER_MINUTES:
        return
    names = ", ".join(f"{nodeid} ({seconds:.0f} s)" for seconds, nodeid in sorted(_calls, reverse=True)[:5])
    terminalreporter.write_line(
        f"warning: the fast tier took over {FAST_TIER_MINUTES} min: share a fit or shrink its slowest tests, "
        f"or mark one that starts processes @pytest.mark.full (make test-all): {names}",
        yellow=True,
    )


@pytest.fixture(autouse=True)
def _a_wandb_service_per_test():
    """W&B keeps one service a process, started by its first run: after a test that used W&B in the test
    process, it is stopped (wandb.teardown), as at a process's exit, and the next test's runs start their
    own. A passing test's tmp_path is removed (pyproject.toml): a service left on a removed folder fails
    the next in-process run ('transport failed')."""
    yield
    if "wandb" in sys.modules:
        sys.modules["wandb"].teardown()


@pytest.fixture(scope="session")
def mnist_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mnist(tmp_path_factory.mktemp("mnist"))


@pytest.fixture(scope="session")
def imbalanced_mnist_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Classes 0-4 have 10 training images each, classes 5-9 100 each."""
    return write_imbalanced_mnist(tmp_path_factory.mktemp("imbalanced"), [10] * 5 + [100] * 5)


@pytest.fixture(scope="session")
def fashion_mnist_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mnist(tmp_path_factory.mktemp("fashion"), folder="FashionMNIST")


@pytest.fixture(scope="session")
def cifar10_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cifar(tmp_path_factory.mktemp("cifar10"))


@pytest.fixture(scope="session")
def cifar100_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cifar(tmp_path_factory.mktemp("cifar100"), classes=100)


@pytest.fixture(scope="session")
def image_folder_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A labelled image folder, for the image-folder part's DataModule (skips where it was dropped)."""
    if not has_part("data.image_folder"):
        pytest.skip("the project was made without data.image_folder")
    return write_image_folder(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="session")
def trained_run(mnist_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of one finished MNIST fit (the shrunk defaults, no final test), ``runs/`` in it; read it
    as it is, or take a copy to change (``trained_here``)."""
    from helpers.cli import check, run_app

    cwd = tmp_path_factory.mktemp("trained")
    check(run_app("fit", f"--data.root={mnist_root}", "--test_after_fit=false", cwd=cwd))
    return cwd


@pytest.fixture
def trained_here(trained_run: Path, tmp_path: Path) -> Path:
    """A copy of ``trained_run``'s ``runs/`` in ``tmp_path``, as if that fit had run there; its run folder."""
    from helpers.cli import run_folder

    shutil.copytree(trained_run / "runs", tmp_path / "runs")
    return run_folder(tmp_path)


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template's files in a git repository tagged v1, as copier reads a template; left unchanged."""
    from helpers.tree import template_repository

    return template_repository(tmp_path_factory.mktemp("template"))


@pytest.fixture
def fashion_mnist() -> Path:
    """Debian's real Fashion-MNIST; skipped where missing, except in CI, which installs it."""
    if not FASHION_MNIST.is_dir() and not os.environ.get("CI"):
        pytest.skip(f"{FASHION_MNIST} missing: apt install dataset-fashion-mnist")
    return FASHION_MNIST
