"""CPUSyncBatchNorm and its plugin: 2 gloo processes at batch B against one process at batch 2B."""

import copy
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from helpers.cli import check, free_port, load_probe, max_difference, probe, run_app, run_process
from lightning import LightningModule, Trainer
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from app.distributed.job import DistributedJob, leave_process_group
from app.sync_batchnorm import CPUSyncBatchNorm, SyncBatchNormPlugin
from models import ResNet

B, STEPS = 4, 3  # per-rank batch, optimizer steps
LAYERS = {  # name: (plain layer, one sample's shape)
    "1d-flat": (lambda: nn.BatchNorm1d(3), (3,)),
    "1d-cumulative": (lambda: nn.BatchNorm1d(3, momentum=None), (3, 5)),
    "2d-no-affine": (lambda: nn.BatchNorm2d(3, affine=False), (3, 4, 4)),
    "3d-no-running-stats": (lambda: nn.BatchNorm3d(3, track_running_stats=False), (3, 2, 3, 2)),
}


def plain_layer(name: str) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The layer (random affine weights), a global batch 2B and the weights of a linear loss."""
    make, shape = LAYERS[name]
    torch.manual_seed(0)
    layer = make().double()
    if layer.affine:
        nn.init.normal_(layer.weight), nn.init.normal_(layer.bias)
    x = torch.randn(2 * B, *shape, dtype=torch.float64) * 3 + 1
    return layer, x, torch.randn_like(x)


def resnet() -> nn.Module:
    torch.manual_seed(0)
    return ResNet(in_channels=3, num_classes=5, image_size=8, depth=8, width=4).double()


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS, 2 * B, 3, 8, 8, generator=g, dtype=torch.float64)
    return list(zip(x, torch.randint(5, (STEPS, 2 * B), generator=g), strict=True))


def train(model: nn.Module, rank: int | None = None) -> list[torch.Tensor]:
    """STEPS of SGD; on a rank, on its half of each global batch. Returns the losses."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in batches():
        part = slice(None) if rank is None else slice(rank * B, (rank + 1) * B)
        loss = F.cross_entropy(model(x[part]), y[part])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return losses


def worker(rank: int, port: int, folder: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    part = slice(rank * B, (rank + 1) * B)
    layers = {}
    for name in LAYERS:
        plain, x, w = plain_layer(name)
        layer = SyncBatchNormPlugin().apply(plain)
        assert type(layer) is CPUSyncBatchNorm
        for _ in range(2):  # twice: the cumulative average needs a second step
            xr = x[part].clone().requires_grad_()
            y = layer(xr)
            (y * w[part]).sum().backward()
        layers[name] = {"y": y.detach(), "x.grad": xr.grad, **layer.state_dict()}
        layers[name].update({f"{k}.grad": p.grad for k, p in layer.named_parameters()})
    model = SyncBatchNormPlugin().apply(resnet())
    assert any(isinstance(m, CPUSyncBatchNorm) for m in model.modules())
    losses = torch.stack(train(DistributedDataParallel(model), rank))
    dist.all_reduce(losses)
    result = {"layers": layers, "losses": losses / 2, "weights": model.state_dict()}
    torch.save(result, f"{folder}/rank{rank}.pt")
    leave_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("sync_bn")
    mp.spawn(worker, args=(free_port(), str(folder)), nprocs=2)
    return [torch.load(folder / f"rank{r}.pt", weights_only=True) for r in (0, 1)]


@pytest.mark.full
@pytest.mark.distributed
@pytest.mark.parametrize("name", LAYERS)
def test_layer_sees_the_global_batch_forward_and_backward(name, ranks):
    layer, x, w = plain_layer(name)
    for _ in range(2):
        xg = x.clone().requires_grad_()
        y = layer(xg)
        (y * w).sum().backward()
    expected = {"y": y.detach(), "x.grad": xg.grad, **layer.state_dict()}
    expected.update({f"{k}.grad": p.grad for k, p in layer.named_parameters()})
    got = {k: torch.cat([r["layers"][name][k] for r in ranks]) for k in ("y", "x.grad")}
    for k in expected.keys() - got.keys():  # buffers are equal on both ranks; weight grads add up
        both = [r["layers"][name][k] for r in ranks]
        got[k] = both[0] + both[1] if k.endswith(".grad") else both[0]
        assert k.endswith(".grad") or torch.equal(both[0], both[1])
    assert max_difference(got, expected) < 1e-12


@pytest.mark.full
@pytest.mark.distributed
def test_ddp_training_at_b_per_rank_matches_one_process_at_2b(ranks):
    model = resnet()
    losses = torch.stack(train(model))
    assert max_difference(ranks[0]["weights"], ranks[1]["weights"]) == 0
    assert max_difference(ranks[0]["weights"], model.state_dict()) < 1e-10
    assert (ranks[0]["losses"] - losses).abs().max() < 1e-12
    assert ranks[0]["weights"]["features.1.num_batches_tracked"] == STEPS
    trained = max_difference(dict(model.named_parameters()), dict(resnet().named_parameters()))
    assert trained > 1e-2


@pytest.mark.parametrize("name", LAYERS)
def test_without_a_process_group_it_is_plain_batchnorm(name):
    plain, x, _ = plain_layer(name)
    layer = SyncBatchNormPlugin().apply(copy.deepcopy(plain))
    for mode in (True, True, False):
        plain.train(mode), layer.train(mode)
        assert torch.equal(layer(x), plain(x))
    assert max_difference(layer.state_dict(), plain.state_dict()) == 0


def test_apply_and_revert_keep_the_state_dict():
    model = resnet()
    state = copy.deepcopy(model.state_dict())
    plugin = SyncBatchNormPlugin()
    synced = plugin.apply(model)
    bns = [m for m in synced.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert len(bns) == 9 and all(type(m) is CPUSyncBatchNorm for m in bns)
    assert max_difference(synced.state_dict(), state) == 0
    synced.load_state_dict(resnet().state_dict())  # plain checkpoints load into synced layers
    plain = plugin.revert(synced)
    assert {type(m) for m in plain.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)} == {
        nn.BatchNorm2d
    }
    assert max_difference(plain.state_dict(), state) == 0
    assert type(plugin.apply(nn.BatchNorm1d(2))) is CPUSyncBatchNorm


_g = torch.Generator().manual_seed(2)  # the same data in the workers, which import this file anew
DATA = TensorDataset(torch.randn(4 * B, 3, 6, 6, generator=_g), torch.randint(5, (4 * B,), generator=_g))


class BoringBN(LightningModule):
    """A conv, a BatchNorm, a linear head; each training step checks its BatchNorm is synced."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(
            nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
        )
        self.head = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.net(x))

    def training_step(self, batch, batch_idx):
        assert isinstance(self.net[1], CPUSyncBatchNorm)
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)

    def train_dataloader(self):
        # Rank r takes samples r, r + 2, ...: step s sees samples [2sB, 2(s + 1)B) across both ranks.
        sampler = DistributedSampler(DATA, self.trainer.world_size, self.global_rank, shuffle=False)
        return DataLoader(DATA, batch_size=B, sampler=sampler)


@pytest.mark.full
@pytest.mark.distributed
def test_lightning_ddp_spawn_with_sync_batchnorm_matches_one_process(tmp_path):
    model = BoringBN()
    reference = copy.deepcopy(model)
    optimizer = reference.configure_optimizers()
    for x, y in DataLoader(DATA, batch_size=2 * B):
        optimizer.zero_grad()
        F.cross_entropy(reference(x), y).backward()
        optimizer.step()
    trainer = Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp_spawn",
        sync_batchnorm=True,
        plugins=[SyncBatchNormPlugin()],
        use_distributed_sampler=False,
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        # As in the CLI's runs: a spawned rank whose gloo group outlives it can abort at exit.
        callbacks=[DistributedJob()],
    )
    trainer.fit(model)
    assert type(model.net[1]) is nn.BatchNorm2d  # ddp_spawn brought rank 0's weights back
    assert max_difference(model.state_dict(), reference.state_dict()) < 1e-5
    assert model.net[1].num_batches_tracked == 2
    assert max_difference(dict(model.named_parameters()), dict(BoringBN().named_parameters())) > 1e-2


@pytest.mark.full
@pytest.mark.distributed
def test_sync_batchnorm_flag_makes_two_processes_match_one_with_resnet(mnist_root, tmp_path):
    """ResNet has BatchNorm: with --trainer.sync_batchnorm each rank normalizes over the global batch."""
    common = [f"--data.root={mnist_root}", "--model.net=ResNet", "--model.net.depth=8"]
    common += ["--test_after_fit=false"]
    one = ["--trainer.accelerator=cpu", "--trainer.devices=1", "--data.batch_size=128"]
    one.append("--model.optimizer.lr=0.02")
    check(run_app("fit", *one, *common, probe(tmp_path / "one"), cwd=tmp_path / "one"))
    two = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--data.batch_size=64"]
    two += ["--model.optimizer.lr=0.01", *common, probe(tmp_path / "two")]
    check(run_process("fit", *two, configs=("configs/ddp.yaml",), cwd=tmp_path))
    single, ranks = (
        load_probe(tmp_path / "one", "end", 0),
        [load_probe(tmp_path / "two", "end", r) for r in (0, 1)],
    )
    assert max_difference(ranks[0]["weights"], ranks[1]["weights"]) == 0
    # float32: the synced variance comes from sums of squares, BatchNorm's kernel computes it otherwise; a
    # variance differing in its last bits moves the running_var buffers (not lr-scaled) by a few 1e-6:
    # 3x the tolerance of tests/app/distributed's 2-process tests.
    assert max_difference(ranks[0]["weights"], single["weights"]) < 3e-5
    assert any(key.endswith("running_var") for key in single["weights"])
