"""Real learning on the real Fashion-MNIST (Debian's package), read offline through the CLI."""

from conftest import check, logged, run_app, run_folder


def test_fashion_mnist_learns_offline(fashion_mnist, tmp_path):
    """One epoch of the preset with a larger lr; chance is 10 %, only real learning passes 80 %."""
    result = run_app(
        "fit",
        "--trainer.limit_train_batches=1.0",
        "--model.lr=0.05",
        f"--data.root={tmp_path / 'datasets'}",
        "--data.download=false",
        configs=("configs/fashion_mnist.yaml",),
        cwd=tmp_path,
    )
    check(result)
    assert f"using the OS package's copy in {fashion_mnist}" in result.stderr + result.stdout
    test_acc = logged(run_folder(tmp_path))["test/acc"][-1]
    print(f"Fashion-MNIST test accuracy after one epoch: {test_acc:.4f}")
    assert test_acc >= 0.80
