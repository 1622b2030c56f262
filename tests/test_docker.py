"""The Docker image built and run: scripts/docker-smoke.sh, where buildah and debootstrap are installed."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import ROOT

SCRIPT = ROOT / "scripts" / "docker-smoke.sh"


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
