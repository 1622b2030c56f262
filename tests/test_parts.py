"""The optional parts (README, "Make it yours"): each dropped as the README's table says, in a copy of the
tree, leaves a CLI that prints its help and config and trains."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers.cli import ROOT, SHRINK, app_env


def copy_of_the_tree(project: Path) -> None:
    """The project's files (tracked, or new and not ignored) under ``project``."""
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"]
    for name in subprocess.run(listed, cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, project / name)


def parts() -> dict[str, tuple[list[str], str | None]]:
    """``{part: (paths to rm -r, file holding its one line or None)}``, read from the README's table."""
    section = (ROOT / "README.md").read_text().split("## Make it yours", 1)[1].split("\n1. ", 1)[0]
    found = {}
    for row in re.findall(r"^\| (.+?) \| .+ \| (`rm -r .+`.*) \|$", section, re.MULTILINE):
        name, drop = row
        paths = re.match(r"`rm -r ([^`]+)`", drop).group(1).split()
        line_in = re.search(r"its line in `([^`]+)`", drop)
        found[name] = (paths, line_in.group(1) if line_in else None)
    return found


PARTS = parts()


def test_the_readme_lists_the_parts():
    assert {"image folders", "dp", "validation pictures", "W&B sweeps", "benchmarks"} <= set(PARTS)


def package_of(paths: list[str]) -> str:
    """The dotted name of a part's folder, its first path (``data/image_folder`` -> ``data.image_folder``)."""
    return paths[0].removesuffix(".py").replace("/", ".")


def drop(project: Path, paths: list[str], line_in: str | None) -> None:
    """Delete ``paths`` and the one line of ``line_in`` that names the part's package."""
    for path in paths:
        target = project / path
        assert target.exists(), f"the README drops {path}, which is not in the tree"
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    if line_in:
        package = package_of(paths)
        file = project / line_in
        lines = file.read_text().splitlines(keepends=True)
        naming = [line for line in lines if package in line]
        assert len(naming) == 1, f"{line_in} should name {package} on one line, not {len(naming)}"
        file.write_text("".join(line for line in lines if line not in naming))


@pytest.mark.parametrize("part", sorted(PARTS))
def test_each_part_drops_as_the_readme_says(part, mnist_root, tmp_path):
    project = tmp_path / "project"
    copy_of_the_tree(project)
    drop(project, *PARTS[part])
    left = [p for p in PARTS[part][0] if (project / p).exists()]
    assert not left
    package = package_of(PARTS[part][0])
    # Top-level imports: one inside a function that catches ImportError is how code uses a part if present.
    imports = re.compile(rf"^(from|import) {re.escape(package)}\b", re.MULTILINE)
    code = [f for folder in ("app", "models", "data", "benchmarks") for f in (project / folder).rglob("*.py")]
    assert not [str(f) for f in code if imports.search(f.read_text())]

    # The copy's packages only. Python starts without site's .pth files (-S), the editable install's
    # among them: its finder would bring a dropped subpackage back from the project root.
    path = [project, project / "tests", sysconfig.get_paths()["purelib"]]
    env = {**app_env(), "PYTHONPATH": os.pathsep.join(map(str, path))}

    def python(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-S", *args]
        return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300)

    def app(*args: str) -> subprocess.CompletedProcess:
        return python("-m", "app", *args)

    helped = app("--help")
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert "fit" in helped.stdout
    printed = app("fit", "--print_config")
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert "class_path: data.MNISTDataModule" in printed.stdout
    fit = app("fit", *SHRINK, f"--data.root={mnist_root}")
    assert fit.returncode == 0, fit.stderr[-2000:]
    assert list((project / "runs").glob("*/version_0/checkpoints/*.ckpt"))
    # The tests left still load; those that need the dropped part skip when they run.
    collected = python("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests")
    assert collected.returncode == 0, collected.stdout[-3000:]
