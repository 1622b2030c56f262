"""``--model.cuda_graphs``: refused in one line where it cannot run; on a GPU, as accurate as eager."""

import pytest
import torch
from helpers.cli import check, logged, run_app, run_folder, run_process


def test_cuda_graphs_on_cpu_is_one_line_before_training(mnist_root, tmp_path):
    result = run_app("fit", f"--data.root={mnist_root}", "--model.cuda_graphs=true", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --model.cuda_graphs true needs a CUDA GPU (--trainer.accelerator gpu); "
        "this run is on cpu: drop the flag"
    )
    assert not list(tmp_path.glob("runs/*/*/checkpoints/*.ckpt"))  # no step was trained


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graphs_train_the_fast_preset_as_accurately_as_eager(fashion_mnist, tmp_path):
    accuracy = {}
    for name, flags in (("eager", []), ("graphs", ["--model.cuda_graphs=true"])):
        result = run_process(
            "fit",
            "--trainer.accelerator=gpu",
            "--trainer.devices=1",
            "--trainer.logger=CSVLogger",
            f"--data.root={tmp_path / 'datasets'}",
            *flags,
            configs=("configs/fashion_mnist_fast.yaml",),
            shrink=False,
            cwd=tmp_path / name,
        )
        check(result)
        accuracy[name] = logged(run_folder(tmp_path / name))["test/acc"][-1]
    print(f"fast preset test accuracy: {accuracy}")
    assert accuracy["eager"] >= 0.91 and abs(accuracy["graphs"] - accuracy["eager"]) <= 0.01
