"""The optional parts (copier.yml's ``part_files``): a project made from the template without any one of
them has none of its paths nor its lines elsewhere, nothing that only they used, passes its linters, and
its CLI prints its help and config and trains; the project without any runs its own ``make test`` and
``make lint``."""

import re
import sys
from pathlib import Path

import pytest
from helpers.cli import ROOT
from helpers.tree import (
    check_it_runs,
    left_behind,
    lines_of,
    make_in,
    new_project,
    parts,
    python_in,
    train_config,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli there
    import tomli as tomllib

PARTS = parts()
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_copier_yml_defines_each_part_by_what_is_in_the_tree():
    assert {"image folders and photos", "dp", "validation pictures", "W&B sweeps", "benchmarks"} <= set(PARTS)
    assert {"Docker", "Horovod/Fleet migration guide"} <= set(PARTS)
    for name, part in PARTS.items():
        assert part["paths"] and set(part) <= {"paths", "line", "extra", "needs"}, name
        assert part.get("needs", name) in PARTS, f"copier.yml's {name} needs a part it does not define"
        assert part.get("extra", "dev") in EXTRAS, f"copier.yml's {name} names an extra pyproject.toml lacks"
        missing = [path for path in part["paths"] if not (ROOT / path).exists()]
        assert not missing, f"copier.yml's {name} names {missing}, which are not in the tree"
        for line in lines_of(part):
            file, naming = line["file"], line["naming"]
            naming_lines = [line for line in (ROOT / file).read_text().splitlines() if naming in line]
            assert len(naming_lines) == 1, f"{file} should name {naming} on one line, not {len(naming_lines)}"


def package_of(paths: list[str]) -> str:
    """The dotted name of a part's folder, its first path (``data/image_folder`` -> ``data.image_folder``)."""
    return paths[0].removesuffix(".py").replace("/", ".")


@pytest.mark.full
@pytest.mark.parametrize("part", sorted(PARTS))
def test_a_project_without_each_part_runs(part, template, fashion_mnist_root, tmp_path):
    # With it go the parts that need it (W&B sweeps, W&B): copier refuses them alone.
    gone = {part} | {name for name, spec in PARTS.items() if spec.get("needs") == part}
    project = new_project(template, tmp_path / "project", parts=[p for p in PARTS if p not in gone])
    assert not [path for path in PARTS[part]["paths"] if (project / path).exists()]
    dropped = [Path(path) for name in gone for path in PARTS[name]["paths"]]
    kept = [path for name in PARTS if name not in gone for path in PARTS[name]["paths"]]
    # A part's file inside another part's folder (benchmarks/photos.py) goes with that folder.
    assert all(
        (project / path).exists() for path in kept if not any(Path(path).is_relative_to(d) for d in dropped)
    )
    for line in lines_of(PARTS[part]):
        file = project / line["file"]  # (the Dockerfile: the Docker part's, where it is kept)
        assert not file.exists() or line["naming"] not in file.read_text()
    package = package_of(PARTS[part]["paths"])
    # Top-level imports: one inside a function that catches ImportError is how code uses a part if present.
    imports = re.compile(rf"^(from|import) {re.escape(package)}\b", re.MULTILINE)
    code = [f for folder in ("app", "models", "data", "benchmarks") for f in (project / folder).rglob("*.py")]
    assert not [str(f) for f in code if imports.search(f.read_text())]
    assert left_behind(project, sorted(gone), PARTS) == []
    if "extra" in PARTS[part]:
        extras = tomllib.loads((project / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        assert PARTS[part]["extra"] not in extras
        assert not [line for line in extras["dev"] if f"{PARTS[part]['extra']}," in line.split("[", 1)[-1]]
    for lint in (["check"], ["format", "--check"]):
        done = python_in(project, "-m", "ruff", *lint, ".")
        assert done.returncode == 0, done.stdout[-3000:]
    # A one-batch fit of what `make train` trains (Fashion-MNIST, copier's default answer).
    preset = train_config(project)
    one_batch = [f"--config={preset}", "--trainer.limit_train_batches=1", "--trainer.limit_val_batches=1"]
    check_it_runs(project, fashion_mnist_root, *one_batch, data_class="data.FashionMNISTDataModule")


@pytest.mark.full
def test_the_project_without_any_part_passes_its_own_make_test_and_lint(template, tmp_path):
    project = new_project(template, tmp_path / "minimal", parts=[])
    assert left_behind(project, list(PARTS), PARTS) == []
    for target in ("lint", "test"):
        done = make_in(project, target)
        assert done.returncode == 0, f"make {target}:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    assert " passed" in done.stdout and " failed" not in done.stdout


@pytest.mark.full
def test_without_the_syncbatchnorm_part_its_flag_on_cpu_is_one_line(template, mnist_root, tmp_path):
    kept = [p for p in PARTS if p != "SyncBatchNorm on CPU"]
    project = new_project(template, tmp_path / "project", parts=kept)
    ddp = ["--config=configs/ddp.yaml", "--trainer.accelerator=cpu", "--trainer.devices=2"]
    result = python_in(project, "-m", "app", "fit", *ddp, f"--data.root={mnist_root}")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert line.startswith("error: --trainer.sync_batchnorm on CPU needs the template's SyncBatchNorm part")
    assert not list(project.glob("runs/*/version_*")), "the refused run left a folder"
