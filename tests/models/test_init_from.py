"""``--model.init_from``: the tensors that fit by name and shape are loaded, the rest said in one line."""

import pytest
import torch
import torchvision

from models import Backbone, FastCNN, ImageClassifier, MnistCNN, ModelError, init_from
from models.nets.backbone import classifier


def body_equal(net: torch.nn.Module, source: dict[str, torch.Tensor], prefix: str = "") -> int:
    """Asserts every tensor of ``net`` outside its classifier equals ``source[prefix + name]``; returns
    how many."""
    head = classifier(net)[0]
    body = {k: v for k, v in net.state_dict().items() if not k.startswith(f"{head}.")}
    for name, value in body.items():
        assert torch.equal(value, source[prefix + name]), name
    return len(body)


@pytest.mark.parametrize("layout", ["checkpoint", "state_dict", "net_state_dict"])
def test_template_weights_into_another_class_count(layout, tmp_path):
    """A checkpoint's ``state_dict`` (``net.`` names), the module's own or the bare network's."""
    source = ImageClassifier(FastCNN(num_classes=10), num_classes=10)
    state = source.state_dict()
    saved = {
        "checkpoint": {"state_dict": state, "epoch": 3},
        "state_dict": state,
        "net_state_dict": source.net.state_dict(),
    }[layout]
    torch.save(saved, tmp_path / "w.pt")
    net = FastCNN(num_classes=4)
    line = init_from.load(net, str(tmp_path / "w.pt"))
    assert body_equal(net, state, prefix="net.") == 20
    assert not torch.equal(net.head[2].bias, source.net.head[2].bias[:4])
    assert line == (
        f"init_from {tmp_path / 'w.pt'}: loaded 20/22 tensors; skipped "
        "net.head.2.weight: shape 10x128 in the file vs 4x128 here, "
        "net.head.2.bias: shape 10 in the file vs 4 here"
    )


def test_torchvision_weights_file_into_a_backbone(tmp_path):
    """resnet18's state_dict as torchvision publishes it (inner names: ``conv1.weight``, ``fc.bias``)."""
    path = tmp_path / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    path.parent.mkdir(parents=True)
    published = torchvision.models.resnet18().state_dict()
    torch.save(published, path)
    net = Backbone(in_channels=3, num_classes=5, image_size=32, name="resnet18")
    line = init_from.load(net, str(path))
    assert body_equal(net.model, published) == 120
    assert line.startswith(f"init_from {path}: loaded 120/122 tensors; skipped net.model.fc.weight: shape ")


def test_another_architecture_is_refused(tmp_path):
    torch.save(MnistCNN().state_dict(), tmp_path / "mnist.pt")
    with pytest.raises(
        ModelError, match=r"1 of its 12 tensors fit FastCNN by name and shape; net\.features\.0"
    ):
        ImageClassifier(FastCNN(), init_from=str(tmp_path / "mnist.pt"))
    torch.save(torchvision.models.resnet18().state_dict(), tmp_path / "resnet.pt")
    with pytest.raises(
        ModelError, match=r"none of its 122 tensors fits MnistCNN by name and shape \(it has conv1"
    ):
        ImageClassifier(MnistCNN(), init_from=str(tmp_path / "resnet.pt"))
