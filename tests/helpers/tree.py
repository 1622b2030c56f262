"""The template's own tree: its files copied elsewhere, and its optional parts as copier.yml defines them."""

import shutil
import subprocess
from pathlib import Path

import yaml

from helpers.cli import ROOT


def copy_of_the_tree(project: Path) -> None:
    """The project's files (tracked, or new and not ignored) under ``project``."""
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"]
    for name in subprocess.run(listed, cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, project / name)


def copier_config() -> dict:
    """copier.yml, read as YAML."""
    return yaml.safe_load((ROOT / "copier.yml").read_text())


def parts() -> dict[str, dict]:
    """``{part: {"paths": [...], "line": {"file": ..., "naming": ...}}}`` (``line`` where it has one)."""
    return copier_config()["part_files"]["default"]
