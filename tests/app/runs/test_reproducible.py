"""A run on request reproducible: ``--trainer.deterministic true`` twice on CPU, the same weights to the bit;
each run records the releases its results depend on, and the fingerprint of the data it trained on."""

from importlib.metadata import packages_distributions, version

import pytest
import yaml
from helpers.cli import check, load_probe, max_difference, probe, run_app, run_folder

from data import MNISTDataModule


@pytest.mark.full  # two fits: 25 s on a busy 2-core machine
@pytest.mark.versions  # make test-lowest
def test_two_deterministic_cpu_runs_end_with_identical_weights_and_record_their_releases(
    mnist_root, tmp_path
):
    args = [f"--data.root={mnist_root}", "--test_after_fit=false", "--trainer.deterministic=true"]
    for name in ("first", "second"):
        check(run_app("fit", *args, probe(tmp_path / name), cwd=tmp_path / name))
    first, second = (load_probe(tmp_path / name, "end", 0) for name in ("first", "second"))
    assert first["global_step"] == second["global_step"] == 4
    assert max_difference(first["weights"], second["weights"]) == 0
    assert max_difference(first["weights"], load_probe(tmp_path / "first", "start", 0)["weights"]) > 1e-3
    recorded = yaml.safe_load((run_folder(tmp_path / "first") / "hparams.yaml").read_text())["versions"]
    assert {k: recorded[k] for k in ("torch", "lightning", "torchvision")} == {
        k: version(k) for k in ("torch", "lightning", "torchvision")
    }
    (project,) = set(packages_distributions()["app"])  # the name it is installed under (listed once a file)
    assert recorded[project] == version(project)


def test_a_run_records_the_fingerprint_of_its_data(trained_run, mnist_root):
    recorded = yaml.safe_load((run_folder(trained_run) / "hparams.yaml").read_text())
    expected = MNISTDataModule(root=str(mnist_root)).fingerprint()
    assert expected is not None and recorded["data_fingerprint"] == expected
