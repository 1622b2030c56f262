"""copier on this template (copier.yml), from a git repository of its files: ``copier copy`` makes a
project of its own that runs, refuses bad answers before writing anything, and ``copier update`` brings
a later template version into a project its user has edited."""

import os
import re
import subprocess
import sys

import pytest
import yaml
from helpers.cli import ROOT
from helpers.tree import (
    check_it_runs,
    commit_all,
    copier,
    git,
    new_project,
    parts,
    python_in,
    template_repository,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli there
    import tomli as tomllib

CONFIG = yaml.safe_load((ROOT / "copier.yml").read_text())
PARTS = parts()
TEMPLATE_ONLY = CONFIG["template_files"]["default"]


@pytest.fixture
def own_template(tmp_path):
    """A template repository of this test's own, to commit a new version to."""
    return template_repository(tmp_path / "template")


def pyproject(project) -> dict:
    return tomllib.loads((project / "pyproject.toml").read_text())


@pytest.mark.full
def test_the_defaults_make_a_project_of_its_own_that_runs(template, mnist_root, tmp_path):
    project = new_project(template, tmp_path / "my-project")

    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert answers["_commit"] == "v1" and answers["project_name"] == "my-cnn-project"
    assert set(answers["parts"]) == set(PARTS) - {"benchmarks", "Horovod/Fleet migration guide"}
    assert pyproject(project)["project"]["name"] == "my-cnn-project"
    dev = pyproject(project)["project"]["optional-dependencies"]["dev"]
    assert any(line.startswith("my-cnn-project[") for line in dev)  # the dev extra's reference to its own
    defaults = yaml.safe_load((project / "configs" / "defaults.yaml").read_text())
    assert defaults["trainer"]["logger"]["init_args"]["project"] == "my-cnn-project"

    # Its own README; no template-only file, nor the parts left out.
    readme = (project / "README.md").read_text()
    assert readme.startswith("# my-cnn-project\n")
    assert "make train" in readme and "make test" in readme and "copier update --trust" in readme
    assert not [path for path in TEMPLATE_ONLY if (project / path).exists()]
    assert not (project / "benchmarks").exists() and not (project / "docs" / "migrating.md").exists()
    assert not list(project.rglob("*.jinja"))
    check_it_runs(project, mnist_root)


@pytest.mark.full
def test_the_answers_name_the_project_and_choose_what_make_train_trains(template, tmp_path):
    project = new_project(
        template,
        tmp_path / "p",
        project_name="cats.vs_dogs-2",
        description='Cats, "dogs" and birds',
        author="Ada Lovelace",
        parts=list(PARTS),
        dataset="CIFAR-10",
    )
    meta = pyproject(project)["project"]
    assert (meta["name"], meta["description"]) == ("cats.vs_dogs-2", 'Cats, "dogs" and birds')
    assert meta["authors"] == [{"name": "Ada Lovelace"}]
    for sweep in (project / "configs" / "sweeps").glob("*.yaml"):
        assert yaml.safe_load(sweep.read_text())["project"] == "cats.vs_dogs-2"
    assert all((project / path).exists() for part in PARTS.values() for path in part["paths"])
    dry_run = subprocess.run(["make", "-n", "train"], cwd=project, capture_output=True, text=True, check=True)
    assert "-m app fit --config configs/cifar10.yaml" in dry_run.stdout
    assert (project / "configs" / "cifar10.yaml").is_file()


@pytest.mark.parametrize(
    "data, says",
    [
        ({"project_name": "my project!"}, "is not a valid distribution name"),
        ({"project_name": "-leading-dash"}, "is not a valid distribution name"),
        ({"parts": '["dp", "wings"]'}, "wings"),
    ],
)
def test_bad_answers_are_refused_before_anything_is_written(data, says, template, tmp_path):
    args = [arg for key, value in data.items() for arg in ("--data", f"{key}={value}")]
    refused = copier("copy", "--trust", "--defaults", *args, str(template), "new", cwd=tmp_path)
    assert refused.returncode == 1
    assert says in refused.stderr
    assert not (tmp_path / "new").exists()


def test_a_folder_that_holds_files_is_refused(template, tmp_path):
    (tmp_path / "taken" / ".hidden").mkdir(parents=True)
    (tmp_path / "taken" / ".hidden" / "notes.txt").write_text("mine\n")
    refused = copier("copy", "--trust", "--defaults", str(template), "taken", cwd=tmp_path)
    assert refused.returncode == 1
    assert "is not empty" in refused.stderr
    assert [p.relative_to(tmp_path).as_posix() for p in (tmp_path / "taken").rglob("*")] == [
        "taken/.hidden",
        "taken/.hidden/notes.txt",
    ]


MY_NET = """from torch import nn


class MyNet(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, width: int = 8) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, width, 3, padding=1)
        self.pool = nn.Sequential(nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        return self.head(self.pool(self.conv(x)))
"""
MY_PRESET = """# My network, a little wider.
model:
  net:
    class_path: MyNet
    init_args:
      width: 12
"""
V2_TEST = """from app import TEMPLATE_VERSION


def test_the_template_version():
    assert TEMPLATE_VERSION == 2
"""


def edit(file, old: str, new: str) -> None:
    """Replace the one ``old`` in ``file`` with ``new``."""
    text = file.read_text()
    assert text.count(old) == 1, (file, old)
    file.write_text(text.replace(old, new))


@pytest.mark.full
def test_update_brings_the_new_template_version_and_keeps_the_users_edits(own_template, mnist_root, tmp_path):
    template = own_template
    project = new_project(template, tmp_path / "project")
    commit_all(project, "made by copier from v1")

    # The user's edits: a network and a preset of their own, a README section, changed defaults.
    (project / "models" / "nets" / "my_net.py").write_text(MY_NET)
    with (project / "models" / "nets" / "__init__.py").open("a") as nets:
        nets.write("from models.nets.my_net import MyNet as MyNet\n")
    (project / "configs" / "my_net.yaml").write_text(MY_PRESET)
    with (project / "README.md").open("a") as readme:
        readme.write("\n## Our notes\n\nMyNet trains in configs/my_net.yaml.\n")
    defaults = project / "configs" / "defaults.yaml"
    edit(defaults, "  max_epochs: 10\n", "  max_epochs: 20\n")
    edit(defaults, "      lr: 0.01\n", "      lr: 0.05\n")  # v2 changes this line too
    commit_all(project, "our network, preset, notes and defaults")

    # Template v2: a change in app/, a new test, a default the user kept, one the user changed.
    with (template / "app" / "__init__.py").open("a") as init:
        init.write("\nTEMPLATE_VERSION = 2\n")
    (template / "tests" / "test_template_version.py").write_text(V2_TEST)
    edit(template / "configs" / "defaults.yaml", "seed_everything: 42\n", "seed_everything: 7\n")
    edit(template / "configs" / "defaults.yaml", "      lr: 0.01\n", "      lr: 0.02\n")
    commit_all(template, "v2", tag="v2")

    updated = copier("update", "--trust", "--defaults", cwd=project)
    assert updated.returncode == 0, updated.stderr[-3000:]

    assert yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"] == "v2"
    assert "TEMPLATE_VERSION = 2" in (project / "app" / "__init__.py").read_text()
    assert (project / "tests" / "test_template_version.py").read_text() == V2_TEST
    assert (project / "models" / "nets" / "my_net.py").read_text() == MY_NET
    assert (project / "configs" / "my_net.yaml").read_text() == MY_PRESET
    assert "import MyNet as MyNet" in (project / "models" / "nets" / "__init__.py").read_text()
    readme = (project / "README.md").read_text()
    assert readme.startswith("# my-cnn-project\n") and "## Our notes" in readme

    # Both changed the lr line: git lists the file as unmerged, both lines in it; the rest merged.
    assert git(project, "diff", "--name-only", "--diff-filter=U").split() == ["configs/defaults.yaml"]
    text = defaults.read_text()
    assert "      lr: 0.05\n" in text and "      lr: 0.02\n" in text
    assert "seed_everything: 7\n" in text and "  max_epochs: 20\n" in text

    # Resolved as the README says: keep our side of each conflict, mark the file resolved.
    ours = re.sub(r"^<<<<<<< [^\n]*\n(.*?)^=======\n.*?^>>>>>>> [^\n]*\n", r"\1", text, flags=re.S | re.M)
    defaults.write_text(ours)
    git(project, "add", "configs/defaults.yaml")
    printed = python_in(project, "-m", "app", "fit", "--config", "configs/my_net.yaml", "--print_config")
    assert printed.returncode == 0, printed.stderr[-2000:]
    config = yaml.safe_load(printed.stdout)
    assert (config["seed_everything"], config["trainer"]["max_epochs"]) == (7, 20)
    assert config["model"]["optimizer"]["init_args"]["lr"] == 0.05
    assert config["model"]["net"] == {"class_path": "models.nets.MyNet", "init_args": {"width": 12}}
    check_it_runs(project, mnist_root, "--config", "configs/my_net.yaml")
    tested = python_in(
        project, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_template_version.py"
    )
    assert tested.returncode == 0, tested.stdout[-3000:]


@pytest.mark.slow
def test_a_new_project_passes_its_own_make_test(template, tmp_path):
    """What a user runs first on a fresh machine: a virtual environment installed from the registries,
    then the project's whole test suite, both tiers (its CI). Minutes, mostly the install and the suite."""
    project = new_project(template, tmp_path / "project")
    commit_all(project, "made by copier from v1")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        ["make", "test-all"], cwd=project, env=env, capture_output=True, text=True, timeout=3600
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
