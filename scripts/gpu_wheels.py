"""``python scripts/gpu_wheels.py DEST [PIN ...]``: the wheels the GPU machine lacks, for its Python.

The lent GPU machine (Python 3.12, Linux x86_64, no network) has the packages named in
``scripts/gpu_image.txt``; ``python -m app`` and ``make gpu-check`` need a few more (jsonargparse,
wandb, torchdata, torchcodec and what they need). This downloads those into DEST and writes
``DEST/requirements.txt``, the top-level ones at their exact versions, for ``pip install --no-index
--find-links DEST -r DEST/requirements.txt`` there.

Versions: a PIN (``torchcodec==0.11.*``: the build for the machine's torch) if one names the
package, else constraints.txt's (what CI last passed with) where the requirement allows it, else the
newest it allows.
"""

import argparse
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
# The machine's interpreter and platform: requirement markers are evaluated for it, not for this one.
TARGET = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}
PIP = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
PIP += ["--python-version=3.12", "--implementation=cp", "--abi=cp312", "--abi=abi3", "--abi=none"]
for tag in ("manylinux_2_28", "manylinux_2_27", "manylinux_2_17", "manylinux2014", "manylinux1"):
    PIP.append(f"--platform={tag}_x86_64")
PIP.append("--platform=any")


def requirements(path: Path) -> dict[str, Requirement]:
    """A requirements file's lines (comments left out), by canonical name."""
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {canonicalize_name(r.name): r for r in map(Requirement, filter(None, lines))}


def needs(wheel: Path, extras: set[str]) -> list[Requirement]:
    """The wheel's requirements on the target machine, with ``extras`` asked for."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        headers = Parser().parsestr(archive.read(metadata).decode())
    found = [Requirement(line) for line in headers.get_all("Requires-Dist") or []]
    wanted = ["", *sorted(extras)]
    return [
        r for r in found if r.marker is None or any(r.marker.evaluate({**TARGET, "extra": e}) for e in wanted)
    ]


def download(requirement: Requirement, dest: Path) -> Path:
    """``pip download --no-deps`` of one requirement for the target; the wheel it left in ``dest``."""
    subprocess.run([*PIP, f"--dest={dest}", str(requirement)], check=True)
    name = canonicalize_name(requirement.name)
    wheels = [w for w in dest.glob("*.whl") if parse_wheel_filename(w.name)[0] == name]
    matching = [w for w in wheels if requirement.specifier.contains(parse_wheel_filename(w.name)[1], True)]
    return max(matching, key=lambda w: parse_wheel_filename(w.name)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument(
        "pins", nargs="*", type=Requirement, help="versions for the machine: torchcodec==0.11.*"
    )
    args = parser.parse_args()
    args.pins = {canonicalize_name(p.name): p for p in args.pins}
    args.dest.mkdir(parents=True, exist_ok=True)
    image = requirements(ROOT / "scripts" / "gpu_image.txt")
    ci = {
        name: str(r.specifier).removeprefix("==")
        for name, r in requirements(ROOT / "constraints.txt").items()
    }
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    top = [r for r in map(Requirement, project) if canonicalize_name(r.name) not in image]
    # pip's resolver would resolve the image's own packages too (torchdata needs torch, and torch its
    # CUDA wheels): the missing ones are followed by hand, each wheel's needs after it.
    fetched: dict[str, Path] = {}
    queue = list(top)
    while queue:
        asked = queue.pop(0)
        name = canonicalize_name(asked.name)
        if name in image or name in fetched:
            continue
        exact = Requirement(asked.name)
        if name in args.pins:
            exact.specifier = args.pins[name].specifier
        elif name in ci and asked.specifier.contains(ci[name], True):
            exact = Requirement(f"{asked.name}=={ci[name]}")
        else:
            exact.specifier = asked.specifier
        fetched[name] = download(exact, args.dest)
        queue += needs(fetched[name], asked.extras)
    pinned = []
    for r in top:
        extras = f"[{','.join(sorted(r.extras))}]" if r.extras else ""
        pinned.append(
            f"{r.name}{extras}=={parse_wheel_filename(fetched[canonicalize_name(r.name)].name)[1]}\n"
        )
    (args.dest / "requirements.txt").write_text("".join(pinned))
    size = sum(w.stat().st_size for w in fetched.values())
    print(f"{len(fetched)} wheels, {size / 2**20:.1f} MiB in {args.dest}: {', '.join(sorted(fetched))}")


if __name__ == "__main__":
    main()
