"""``--model.freeze`` with ``--model.unfreeze_at_epoch``: fixed until then, on every rank, across a resume."""

import functools

import pytest
import torch
from helpers.cli import (
    app_env,
    callback,
    check,
    load_probe,
    logged,
    max_difference,
    probe,
    run_app,
    run_folder,
    run_process,
)
from helpers.data_files import write_photo_folder

from models import FastCNN, ImageClassifier, ModelError, optimization
from models.freezing import frozen_names

# FastCNN: BatchNorm in the frozen part, whose running statistics must stay fixed too.
FREEZE = ["--model.net=FastCNN", "--model.freeze=features", "--model.unfreeze_at_epoch=1"]
TWO_EPOCHS = ["--trainer.max_epochs=2", "--test_after_fit=false", "--trainer.limit_val_batches=1"]
# Without the default callbacks (pictures, plots): what is tested here needs none of them.
BARE = "--trainer.callbacks=[app.callbacks.epoch_values.LogEachEpoch]"  # none of the others


def split(weights: dict[str, torch.Tensor]) -> tuple[dict, dict]:
    """(frozen part, the rest) of a module's state_dict: features' tensors, BatchNorm statistics included."""
    frozen = {k: v for k, v in weights.items() if k.startswith("net.features.")}
    return frozen, {k: v for k, v in weights.items() if k.startswith("net.head.")}


@pytest.mark.full
@pytest.mark.distributed
def test_frozen_until_the_unfreeze_epoch_on_both_ddp_ranks_from_one_decoded_copy(tmp_path):
    """Own photos under DDP with AdamW: rank 0 decodes the folder once into ROOT/.cache; rank 1 reads
    that copy; Adam keeps no moments for the frozen tensors, and the ranks stay bit-identical."""
    photos = write_photo_folder(tmp_path / "photos", per_class=16)
    args = [
        "--trainer.accelerator=cpu",
        "--trainer.devices=2",
        "--trainer.strategy=ddp",
        *FREEZE,
        *TWO_EPOCHS,
        "--model.optimizer=AdamW",
        "--model.optimizer.lr=0.001",
    ]
    args += ["--data=ImageFolderDataModule", f"--data.root={photos}", "--data.loader=resident"]
    # Epochs shorter than the logging interval: train/loss is logged at their end, synced over the ranks.
    args += ["--data.batch_size=8", "--data.val_size=0.2", "--trainer.log_every_n_steps=50"]
    spy = callback("helpers.weights_probe.WeightsProbe", folder=str(tmp_path / "p"), epochs=True)
    warnings_shown = {**app_env(), "PYTHONWARNINGS": "default"}  # Lightning's, as a user sees them
    result = run_process("fit", *args, BARE, spy, env=warnings_shown, cwd=tmp_path)
    check(result)
    output = result.stdout + result.stderr
    for folder in ("train", "test"):
        assert output.count(f"decoding 48 images of {photos}/{folder} ") == 1
    assert "in memory" not in output and len(list((photos / ".cache").glob("*.pt"))) == 2
    assert "sync_dist" not in output and len(logged(run_folder(tmp_path))["train/loss"]) == 2
    ranks = [
        {
            moment: split(load_probe(tmp_path / "p", moment, r)["weights"])
            for moment in ("start", "epoch0", "end")
        }
        for r in (0, 1)
    ]
    for moment in ("start", "epoch0", "end"):  # bit-identical ranks
        assert max_difference(ranks[0][moment][0], ranks[1][moment][0]) == 0
        assert max_difference(ranks[0][moment][1], ranks[1][moment][1]) == 0
    start, epoch0, end = (ranks[0][m] for m in ("start", "epoch0", "end"))
    assert max_difference(start[0], epoch0[0]) == 0  # frozen through epoch 0, statistics too
    assert max_difference(start[1], epoch0[1]) > 1e-4  # the head trained
    changed = [k for k in epoch0[0] if not torch.equal(epoch0[0][k], end[0][k]) and "num_batches" not in k]
    assert len(changed) == 15  # unfrozen at epoch 1: every weight and statistic moved


def test_a_resume_after_the_unfreeze_epoch_ends_as_an_uninterrupted_run(mnist_root, tmp_path):
    """4 steps an epoch; stopped at step 6 (epoch 1, unfrozen), resumed with the unfrozen lrs (and
    refused without the freeze, whose optimizer groups differ)."""
    data = [f"--data.root={mnist_root}", *FREEZE, *TWO_EPOCHS, "--last_checkpoint.every_n_steps=3", BARE]
    check(run_app("fit", *data, probe(tmp_path / "whole"), cwd=tmp_path / "whole"))
    whole = load_probe(tmp_path / "whole", "end", 0)
    cut = run_app("fit", *data, callback("helpers.stops.SigtermAt", step=6), cwd=tmp_path / "cut")
    assert cut.returncode == 143, cut.stderr[-2000:]
    # Resumed without the freeze: one line, and the run is left as it was for the right command.
    unfrozen = [arg for arg in data if "freeze" not in arg]
    refused = run_app("fit", *unfrozen, "--ckpt_path=last", cwd=tmp_path / "cut")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert (
        "was trained with --model.freeze ['features'], this run has []: its optimizer cannot continue"
        in (refused.stderr.strip().splitlines()[-1])
    )
    check(run_app("fit", *data, "--ckpt_path=last", probe(tmp_path / "resumed"), cwd=tmp_path / "cut"))
    resumed = load_probe(tmp_path / "resumed", "end", 0)
    assert resumed["global_step"] == whole["global_step"] == 8
    assert max_difference(resumed["weights"], whole["weights"]) == 0


@pytest.mark.parametrize("optimizer_class", [torch.optim.SGD, torch.optim.AdamW])
def test_the_optimizer_leaves_frozen_tensors_alone_and_unfreezing_sets_the_group_lr(optimizer_class):
    """Gradients, momentum (Adam's moments) and weight decay move nothing while frozen; then lr is
    ratio x the head's and the group gets its weight decay back."""
    model = ImageClassifier(FastCNN(), freeze=["features"], unfreeze_at_epoch=1, backbone_lr_ratio=0.25)
    freezing = model.freezing
    groups = optimization.param_groups(model.net, freezing.names, norm_weight_decay=None)
    factory = functools.partial(optimizer_class, lr=0.1, weight_decay=5e-3)
    optimizer = optimization.build_optimizer(factory, groups, factor=1.0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for _ in range(3):
        model.net(torch.randn(4, 1, 28, 28)).sum().backward()
        freezing.drop_grads(epoch=0)
        freezing.set_lrs(optimizer, epoch=0)
        optimizer.step()
    frozen = [
        k for k in before if k.startswith("net.features.") and "running" not in k and "num_batches" not in k
    ]
    assert all(torch.equal(before[k], model.state_dict()[k]) for k in frozen)
    assert not torch.equal(before["net.head.0.weight"], model.net.head[0].weight)
    assert not any(p in optimizer.state for p in model.net.features.parameters())  # no state kept
    freezing.set_lrs(optimizer, epoch=1)
    assert [g["lr"] for g in optimizer.param_groups] == [0.1, 0.025]
    assert optimizer.param_groups[1]["weight_decay"] == 5e-3


def test_a_freeze_pattern_matching_nothing_names_the_modules():
    with pytest.raises(
        ModelError, match=r"'layer\*' matches no parameter of FastCNN; its modules: features, "
    ):
        frozen_names(FastCNN(), ["layer*"])
    net = FastCNN()
    assert frozen_names(net, ["backbone"]) == {n for n, _ in net.named_parameters()} - {
        "head.2.weight",
        "head.2.bias",
    }


def test_the_freeze_line_says_until_when():
    lines = {
        epoch: ImageClassifier(FastCNN(), freeze=["features"], unfreeze_at_epoch=epoch).freezing.describe()
        for epoch in (None, 0, 2)
    }
    assert lines[None].endswith("statistics frozen for good")
    assert lines[2].endswith("statistics frozen until epoch 2, then trained at 0.1 x lr")
    assert lines[0].startswith("freeze: none (") and lines[0].endswith("trained at 0.1 x lr from epoch 0)")
