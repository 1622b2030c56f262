"""Docker (an optional part): the Dockerfile and .dockerignore read and linted, and the image built and run
(scripts/docker-smoke.sh) where buildah and debootstrap are installed."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli there
    import tomli as tomllib

SCRIPT = ROOT / "scripts" / "docker-smoke.sh"
BIN = Path(sys.executable).parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(maxsplit=1)[0].upper(), line.split(maxsplit=1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def instructions(keyword: str) -> list[str]:
    return [args for key, args in dockerfile() if key == keyword]


def test_hadolint_finds_nothing():
    result = subprocess.run(
        [BIN / "hadolint", "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr
    # An ignored rule is explained on its own line or after the rule list.
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    for i, line in enumerate(lines):
        if "hadolint ignore=" in line:
            reason = re.sub(r"#\s*hadolint ignore=\S+", "", line).strip(" #")
            assert reason or lines[i - 1].lstrip().startswith("#"), f"unexplained ignore: {line}"


def test_dockerfile_installs_the_project_as_pyproject_describes():
    commands = [shlex.split(part) for run in instructions("RUN") for part in re.split(r"&&|;|\|\|", run)]
    installs = [c[c.index("install") + 1 :] for c in commands if "pip" in c[:3] and "install" in c]
    # Only `.` (with an extra of its own): dependencies come from pyproject's ranges, never from a list kept
    # here.
    targets = [[a for a in args if not a.startswith("-")] for args in installs]
    assert installs and all(t in (["."], [".${EXTRAS}"]) for t in targets), targets

    copies = [shlex.split(args) for args in instructions("COPY")]
    copied = {source for *sources, _ in copies for source in sources}
    assert {"pyproject.toml", PYPROJECT["project"]["readme"]} <= copied
    # A folder COPY copies its contents: each package (and configs/) needs its own `COPY dir dir`.
    folders = [(*sources, dest.rstrip("/")) for *sources, dest in copies]
    for folder in [*PYPROJECT["tool"]["setuptools"]["packages"], "configs"]:
        assert (folder, folder) in folders, f"{folder}/ not copied as a folder"

    assert json.loads(instructions("ENTRYPOINT")[-1]) == ["python", "-m", "app"]
    cmd = json.loads(instructions("CMD")[-1])
    assert cmd[0] == "fit" and (ROOT / cmd[cmd.index("--config") + 1]).is_file()
    assert instructions("USER")[-1].split(":")[0] not in {"root", "0"}


def docker_ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or a folder above it wins; ``**`` spans folders."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        regex = re.escape(pattern.lstrip("!").strip("/")).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*")
        regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            ignored = not pattern.startswith("!")
    return ignored


def test_dockerignore_keeps_out_data_runs_and_environments():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in [".git", ".venv/bin/python", "datasets/MNIST/raw/x", "runs/version_0", "wandb/run-1"]:
        assert docker_ignored(path, patterns), path
    copied = [s for args in instructions("COPY") for s in shlex.split(args)[:-1]]
    files = [*copied, *(f.relative_to(ROOT).as_posix() for s in copied for f in (ROOT / s).rglob("*"))]
    assert not [f for f in files if docker_ignored(f, patterns) and "__pycache__" not in f]


def missing() -> str | None:
    """Why the smoke test cannot run on this machine; None if it can."""
    tools = [tool for tool in ("buildah", "debootstrap") if shutil.which(tool) is None]
    if tools:
        return f"{' and '.join(tools)} missing: apt-get install buildah debootstrap"
    if os.geteuid() != 0:
        return "needs root (debootstrap, buildah's chroot isolation)"
    if not Path("/usr/share/datasets/fashion-mnist").is_dir():
        return "/usr/share/datasets/fashion-mnist missing: apt-get install dataset-fashion-mnist"
    return None


@pytest.mark.slow
@pytest.mark.skipif(missing() is not None, reason=missing() or "")
def test_the_image_builds_keeps_the_base_torch_and_trains_as_its_user():
    """Minutes with the base and its wheels kept from an earlier run; the first run downloads 3 GB."""
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(
        ["bash", SCRIPT],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=3600,
    )
    out = result.stdout
    print(out[-3000:])
    assert result.returncode == 0, out[-6000:]
    assert out.rstrip().endswith("docker-smoke: OK")

    # `pip install .` kept the base's torch, and the image runs as its own user, not root.
    base, image = re.search(r"^torch: base (\S+), image (\S+)$", out, re.M).groups()
    assert base == image
    assert int(re.search(r"^user: uid (\d+)$", out, re.M)[1]) != 0
    assert "using the OS package's copy in /usr/share/datasets/fashion-mnist" in out

    # What the runs in the image wrote, copied out of it.
    run = Path(re.search(r"^run folder: (.+)$", out, re.M)[1])
    assert (run / "checkpoints" / "last.ckpt").stat().st_size > 0
    assert (run / "model.pt").stat().st_size > 0
    assert "exported model: logits (2, 10)" in out
    ddp_run = Path(re.search(r"^torchrun's run folder: (.+)$", out, re.M)[1])
    assert ddp_run != run
    assert "world size 2" in out
    assert "test/acc" in (ddp_run / "metrics.csv").read_text()
