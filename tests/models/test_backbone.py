"""Stock backbones by name: weights from torch's hub cache as it lies on disk, one download per node,
the head and first convolution fitted to the data, one-line errors. No network: the tests write the
weights files themselves."""

import hashlib
import os
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torchvision
from helpers.cli import check, free_port, run_app
from helpers.data_files import write_photo_folder
from torchvision.models import ResNet18_Weights

from models import Backbone
from models.nets import weights as hub

V1 = ResNet18_Weights.IMAGENET1K_V1


def resnet18_state(num_classes: int = 1000, seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return torchvision.models.resnet18(num_classes=num_classes).state_dict()


@pytest.fixture
def cached(tmp_path, monkeypatch) -> dict[str, torch.Tensor]:
    """resnet18 ImageNet weights where torch's hub cache keeps them: $TORCH_HOME/hub/checkpoints."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    state = resnet18_state()
    path = tmp_path / "torch" / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    assert path.name == Path(V1.url).name and hub.cache_path(V1.url) == path
    path.parent.mkdir(parents=True)
    torch.save(state, path)
    return state


def body_equal(net: Backbone, state: dict[str, torch.Tensor], skip: tuple[str, ...] = ("fc.",)) -> bool:
    own = net.model.state_dict()
    return all(torch.equal(own[k], v) for k, v in state.items() if not k.startswith(skip))


def test_random_backbone_fits_the_data_shape():
    net = Backbone(in_channels=1, num_classes=10, image_size=28, name="resnet18")
    assert net.model.conv1.in_channels == 1 and net.model.fc.out_features == 10
    assert net(torch.randn(2, 1, 28, 28)).shape == (2, 10)
    assert net.preprocessing() is None


@pytest.mark.parametrize("weights", ["IMAGENET1K_V1", "DEFAULT", "ResNet18_Weights.IMAGENET1K_V1"])
def test_cached_weights_load_into_the_body_and_the_head_is_replaced(cached, weights):
    net = Backbone(num_classes=10, name="resnet18", weights=weights)
    assert body_equal(net, cached)
    assert net.model.fc.weight.shape == (10, 512)
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    same = Backbone(num_classes=1000, name="resnet18", weights=weights)
    assert body_equal(same, cached, skip=())  # the class count matches: the head is kept


def test_preprocessing_is_the_weights_own(cached):
    pre = Backbone(name="resnet18", weights="DEFAULT").preprocessing()
    assert (pre.resize_size, pre.crop_size) == (256, 224)
    assert pre.mean == pytest.approx((0.485, 0.456, 0.406)) and pre.std == pytest.approx(
        (0.229, 0.224, 0.225)
    )
    assert pre.interpolation == "bilinear"


def test_one_channel_sums_the_rgb_kernels(cached):
    grey = Backbone(in_channels=1, num_classes=1000, image_size=28, weights="DEFAULT").eval()
    rgb = Backbone(in_channels=3, num_classes=1000, image_size=28, weights="DEFAULT").eval()
    assert torch.equal(grey.model.conv1.weight, cached["conv1.weight"].sum(dim=1, keepdim=True))
    assert body_equal(grey, cached, skip=("conv1.",))
    x = torch.randn(2, 1, 28, 28)
    torch.testing.assert_close(grey(x), rgb(x.expand(-1, 3, -1, -1)), atol=1e-4, rtol=1e-4)
    four = Backbone(in_channels=4, num_classes=1000, weights="DEFAULT")
    torch.testing.assert_close(four.model.conv1.weight, cached["conv1.weight"][:, [0, 1, 2, 0]] * 3 / 4)


def test_state_dict_file_with_another_head(tmp_path):
    state = resnet18_state(num_classes=5, seed=1)
    torch.save(state, tmp_path / "mine.pth")
    net = Backbone(num_classes=10, weights=str(tmp_path / "mine.pth"))
    assert body_equal(net, state) and net.model.fc.out_features == 10
    assert body_equal(Backbone(num_classes=5, weights=str(tmp_path / "mine.pth")), state, skip=())
    assert net.preprocessing() is None
    other = {"conv1.weight": torch.zeros(1), "features.0.weight": torch.zeros(1)}
    torch.save(other | {key: state[key] for key in list(state)[1:]}, tmp_path / "other.pth")
    with pytest.raises(ValueError) as refused:
        Backbone(weights=str(tmp_path / "other.pth"))
    assert str(refused.value) == (
        f"{tmp_path / 'other.pth'} is not a resnet18 state_dict: 1 of its tensors are not resnet18's "
        "(features.0.weight); 1 have another shape (conv1.weight); "
        f"--model.init_from {tmp_path / 'other.pth'} would load those that fit"
    )
    with pytest.raises(ValueError, match=r"no weights file .*nothing\.pth"):
        Backbone(weights=str(tmp_path / "nothing.pth"))


def test_unknown_name_lists_close_matches():
    with pytest.raises(ValueError, match="unknown torchvision model 'resnet19'; close: resnet18, "):
        Backbone(name="resnet19")


def test_weights_name_the_model_lacks_lists_its_names():
    with pytest.raises(
        ValueError, match="resnet18 has no weights 'IMAGENET1K_V2'; its weights: IMAGENET1K_V1"
    ):
        Backbone(weights="IMAGENET1K_V2")


def test_no_cached_file_and_no_download_names_the_file_and_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setattr(V1.value, "url", (tmp_path / "offline" / "resnet18-f37072fd.pth").as_uri())
    with pytest.raises(ValueError) as error:
        Backbone(weights="DEFAULT")
    message = str(error.value)
    assert "\n" not in message
    assert f"no weights file resnet18-f37072fd.pth in {tmp_path / 'torch' / 'hub' / 'checkpoints'}" in message
    assert "download failed" in message and "copy it into that folder" in message


@pytest.mark.parametrize("source", ["torchvision", "timm"])
def test_the_cli_tries_a_failing_download_once(source, tmp_path, monkeypatch, mnist_root):
    """``--model.net`` is ``Net | nn.Module``: jsonargparse builds the network again for the second type
    when the first raises. The download is not tried again (timm's retries take a minute each time
    offline), and the user reads one error line."""
    monkeypatch.setattr(hub, "failed_downloads", {})
    if source == "torchvision":
        monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
        monkeypatch.setattr(V1.value, "url", (tmp_path / "offline" / "resnet18-f37072fd.pth").as_uri())
        module, function = torch.hub, "load_state_dict_from_url"
        net, error = "resnet18", "error: no weights file resnet18-f37072fd.pth"
    else:
        module = pytest.importorskip("timm")
        hf_constants = pytest.importorskip("huggingface_hub.constants")
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)  # no network, without the retries
        function, net = "create_model", "timm/resnet18"
        error = "error: timm/resnet18 weights could not be loaded"
    tries, build = [], getattr(module, function)
    monkeypatch.setattr(module, function, lambda *a, **k: tries.append(a) or build(*a, **k))
    flags = ["--model.net=Backbone", f"--model.net.name={net}", "--model.net.weights=DEFAULT"]
    done = run_app("fit", f"--data.root={mnist_root}", *flags, cwd=tmp_path / "run")
    assert done.returncode != 0 and len(tries) == 1
    assert done.stderr.strip().splitlines()[-1].startswith(error)


def weights_source(folder: Path) -> tuple[str, dict[str, torch.Tensor]]:
    """A resnet18 file served at a ``file://`` URL whose name carries its sha256 prefix, as torch's do."""
    state = resnet18_state(seed=2)
    folder.mkdir(parents=True)
    torch.save(state, folder / "weights.pth")
    digest = hashlib.sha256((folder / "weights.pth").read_bytes()).hexdigest()[:8]
    source = (folder / "weights.pth").rename(folder / f"resnet18-{digest}.pth")
    return source.as_uri(), state


def download_worker(rank: int, port: int, url: str, folder: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LOCAL_RANK=str(rank), TORCH_HOME=f"{folder}/torch"
    )
    real = torch.hub.download_url_to_file

    def logged(*args, **kwargs):
        with open(f"{folder}/downloads-rank{rank}", "a") as log:
            log.write(f"{args[0]}\n")
        return real(*args, **kwargs)

    torch.hub.download_url_to_file = logged
    V1.value.url = url
    dist.init_process_group("gloo", rank=rank, world_size=2)
    net = Backbone(num_classes=10, weights="IMAGENET1K_V1")
    torch.save(net.model.state_dict(), f"{folder}/rank{rank}.pt")
    dist.destroy_process_group()


@pytest.mark.full
@pytest.mark.distributed
@pytest.mark.versions  # make test-lowest
def test_two_ranks_download_once_and_both_load_the_file(tmp_path):
    url, state = weights_source(tmp_path / "server")
    mp.spawn(download_worker, args=(free_port(), url, str(tmp_path)), nprocs=2)
    assert (tmp_path / "downloads-rank0").read_text() == f"{url}\n"
    assert not (tmp_path / "downloads-rank1").exists()
    cached = tmp_path / "torch" / "hub" / "checkpoints" / Path(url).name
    assert cached.read_bytes() == (tmp_path / "server" / cached.name).read_bytes()
    for rank in (0, 1):
        loaded = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        assert all(torch.equal(loaded[k], v) for k, v in state.items() if not k.startswith("fc."))


def test_other_ranks_wait_for_the_file_without_a_process_group(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.hub, "download_url_to_file", lambda *a, **k: pytest.fail("rank 1 downloaded"))
    url = "https://example.invalid/models/net-0123abcd.pth"
    path = hub.cache_path(url)
    path.parent.mkdir(parents=True)
    writer = threading.Timer(0.3, lambda: torch.save({"w": torch.ones(1)}, path))
    writer.start()
    assert hub.fetch(url) == path
    writer.join()


def test_timm_model_by_name_with_a_file(tmp_path):
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    state = timm.create_model("test_resnet").state_dict()
    torch.save(state, tmp_path / "test_resnet.pth")
    net = Backbone(
        in_channels=1, num_classes=5, name="timm/test_resnet", weights=str(tmp_path / "test_resnet.pth")
    )
    stem = next(k for k in state if k.endswith("weight") and state[k].dim() == 4)
    own = net.model.state_dict()
    assert torch.allclose(own[stem], state[stem].sum(dim=1, keepdim=True))
    assert own["fc.weight"].shape[0] == 5
    assert all(torch.equal(own[k], v) for k, v in state.items() if k not in (stem, "fc.weight", "fc.bias"))
    assert net(torch.randn(2, 1, 32, 32)).shape == (2, 5)
    with pytest.raises(ValueError, match="unknown timm model 'test_resnt'; close: test_resnet"):
        Backbone(name="timm/test_resnt")
    with pytest.raises(ValueError, match="timm/test_resnet has no weights 'nope'; its weights: "):
        Backbone(name="timm/test_resnet", weights="nope")


def test_timm_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "timm", None)
    with pytest.raises(ValueError, match=r"timm/resnet18 needs timm: pip install '\.\[timm\]'"):
        Backbone(name="timm/resnet18")


def test_cli_fits_a_pretrained_resnet18_on_mnist(cached, mnist_root, tmp_path):
    net = ["--model.net=Backbone", "--model.net.name=resnet18"]
    # Batches of 16, 2 of them validated and tested: a fit's every stage, with the least of ResNet-18's work.
    small = ["--data.batch_size=16", "--trainer.limit_val_batches=2", "--trainer.limit_test_batches=2"]
    result = run_app(
        "fit", f"--data.root={mnist_root}", *net, *small, "--model.net.weights=DEFAULT", cwd=tmp_path
    )
    check(result)
    assert "test/acc" in result.stdout + result.stderr
    bad = run_app("fit", f"--data.root={mnist_root}", *net, "--model.net.weights=V9", cwd=tmp_path)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1] == (
        "error: resnet18 has no weights 'V9'; its weights: IMAGENET1K_V1, DEFAULT (or a state_dict file)"
    )


def test_pretrained_weights_give_the_image_folder_their_normalization_and_crop(cached, tmp_path):
    """The CLI hands the weights' preprocessing to the data (data/ does not import models/); given
    --data.mean/--data.std win."""
    root = write_photo_folder(tmp_path / "photos", per_class=4)
    args = ["--data=ImageFolderDataModule", f"--data.root={root}", "--data.image_size=32", "--untrained=true"]
    args += ["--model.net=Backbone", "--model.net.name=resnet18", "--model.net.weights=DEFAULT"]
    result = run_app("validate", *args, "--data.val_size=3", "--trainer.limit_val_batches=1", cwd=tmp_path)
    check(result)
    assert (
        "data: as the weights were trained: mean (0.485, 0.456, 0.406), std (0.229, 0.224, 0.225), "
        "short side 256 then centre crop 224 (crop_ratio 0.875); this run crops 32 px, they saw 224 "
        "(--data.image_size 224)"
    ) in result.stderr
    from data import ImageFolderDataModule

    given = ImageFolderDataModule(str(root), mean=(0.5, 0.5, 0.5), std=(0.2, 0.2, 0.2))
    given.follow_weights(256, 224, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    assert (given.mean, given.std, given.crop_ratio) == ((0.5,) * 3, (0.2,) * 3, 0.875)
