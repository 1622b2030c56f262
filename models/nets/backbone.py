"""Any torchvision or timm classification model by name, pretrained or not, as a :class:`Net`."""

import math
import pickle
from dataclasses import dataclass
from pathlib import Path

import torch
import torchvision
from torch import Tensor, nn

from models.nets import weights as hub
from models.nets.net import Net, classifier

TIMM = "timm/"
# Without weights these two build auxiliary classifiers (extra outputs in training that DDP would
# see as unused parameters); their pretrained builders drop them.
NO_AUX = {
    "googlenet": {"aux_logits": False, "init_weights": True},
    "inception_v3": {"aux_logits": False, "init_weights": True},
}


@dataclass(frozen=True)
class Preprocessing:
    """How the weights' training images were prepared: resize the short side, center crop, normalize."""

    resize_size: int
    crop_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    interpolation: str


class Backbone(Net):
    """A stock classification model, its classifier sized to ``num_classes``.

    The pretrained weights are loaded into the model as published; then, where the class count
    differs, the classifier (the last linear or 1x1 convolution layer) is replaced by a new one, and
    for ``in_channels`` other than 3 the first convolution is rebuilt from the pretrained RGB
    kernels: summed over the colours for 1 channel (an image gives what the RGB model gives for it
    copied into R, G and B), else repeated cyclically and scaled by 3 / ``in_channels``.

    Args:
        name: a torchvision model (``torchvision.models.list_models()``: ``resnet50``) or
            ``timm/<name>`` (any ``timm.list_models()``, with the ``timm`` extra installed).
        weights: None (random init); ``DEFAULT`` or a weights name (torchvision: ``IMAGENET1K_V1``;
            timm: a pretrained tag, ``a1_in1k``); or a state_dict file (its classifier is kept
            where its class count is ``num_classes``). torchvision's come from
            torch's hub cache, ``$TORCH_HOME/hub/checkpoints``, downloaded there by one process per
            node when missing; timm's from the Hugging Face cache, whose file locks let the
            processes share one download.
        image_size: checked against torchvision's minimum input size; the CNNs pool globally.
    """

    def __init__(
        self,
        in_channels: int = 3,
        num_classes: int = 10,
        image_size: int = 32,
        name: str = "resnet18",
        weights: str | None = None,
    ) -> None:
        super().__init__()
        build = _timm if name.startswith(TIMM) else _torchvision
        self.model, self._preprocessing = build(name, weights, in_channels, num_classes, image_size)

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x)

    def preprocessing(self) -> Preprocessing | None:
        """The named weights' own resize, crop and normalization; None for random or file weights."""
        return self._preprocessing


def _torchvision(
    name: str, weights: str | None, in_channels: int, num_classes: int, image_size: int
) -> tuple[nn.Module, Preprocessing | None]:
    models = torchvision.models
    names = models.list_models(module=models)
    if name not in names:
        raise ValueError(f"{hub.unknown('torchvision model', name, names)} (or timm/<name>)")
    enum = models.get_model_weights(name)
    least = max(enum.DEFAULT.meta["min_size"])
    if image_size < least:
        raise ValueError(f"{name} needs images of at least {least} px; the data's image_size is {image_size}")
    chosen, preprocessing, classes = None, None, 1000
    if weights is None:
        model = models.get_model(name, **NO_AUX.get(name, {}))
    elif hub.is_file(weights):
        model = models.get_model(name, **NO_AUX.get(name, {}))
        classes = _load_file(model, hub.check_file(weights), name)
    else:
        member = weights.removeprefix(f"{enum.__name__}.")
        if member not in enum.__members__:
            raise ValueError(
                f"{name} has no weights {weights!r}; its weights: {', '.join(enum.__members__)} "
                "(or a state_dict file)"
            )
        chosen = enum[member]
        classes = len(chosen.meta["categories"])
        path = hub.fetch(chosen.url)
        try:
            # Finds the file in the cache; the builder applies the model's own loading quirks.
            model = models.get_model(name, weights=chosen)
        except (RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as err:
            message = f"{path} is not {name} {chosen}: {_brief(err)}; delete it to download it again"
            raise ValueError(message) from err
        t = chosen.transforms()
        preprocessing = Preprocessing(
            t.resize_size[0], t.crop_size[0], tuple(t.mean), tuple(t.std), t.interpolation.value
        )
    _adapt_first_conv(model, in_channels)
    _replace_head(model, classes, num_classes)
    return model, preprocessing


def _load_file(model: nn.Module, path: Path, name: str) -> int:
    """Load a state_dict file, the classifier first sized to the file's; returns its class count."""
    state = hub.read_state_dict(path)
    head, _ = classifier(model)
    weight = state.get(f"{head}.weight")
    classes = 1000 if weight is None else weight.shape[0]
    _replace_head(model, 1000, classes)
    own = model.state_dict()
    problems = {
        f"of {name}'s tensors are not in it": [key for key in own if key not in state],
        f"of its tensors are not {name}'s": [key for key in state if key not in own],
        "have another shape": [key for key in own if key in state and state[key].shape != own[key].shape],
    }
    if any(problems.values()):
        found = "; ".join(f"{len(keys)} {what} ({_first(keys)})" for what, keys in problems.items() if keys)
        raise ValueError(
            f"{path} is not a {name} state_dict: {found}; --model.init_from {path} would load those that fit"
        )
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"{path} is not a {name} state_dict: {_brief(err)}") from err
    return classes


def _first(keys: list[str]) -> str:
    return ", ".join(keys[:3]) + (", ..." if len(keys) > 3 else "")


def _replace_head(model: nn.Module, classes: int, num_classes: int) -> None:
    name, old = classifier(model)
    linear = isinstance(old, nn.Linear)
    outputs = old.out_features if linear else old.out_channels
    if outputs != classes:
        raise ValueError(f"found no classifier in {type(model).__name__}: its last layer {name} is not one")
    if num_classes == classes:
        return
    if linear:
        new = nn.Linear(old.in_features, num_classes, bias=old.bias is not None)
    else:
        new = nn.Conv2d(old.in_channels, num_classes, old.kernel_size, old.stride, old.padding)
    _set(model, name, new)


def _adapt_first_conv(model: nn.Module, in_channels: int) -> None:
    if in_channels == 3:
        return
    # Hand-written: torchvision's builders take no channel count (timm's in_chans does this itself).
    name, old = next(
        (n, m) for n, m in model.named_modules() if isinstance(m, nn.Conv2d) and m.in_channels == 3
    )
    new = nn.Conv2d(
        in_channels,
        old.out_channels,
        old.kernel_size,
        old.stride,
        old.padding,
        old.dilation,
        old.groups,
        old.bias is not None,
        old.padding_mode,
    )
    with torch.no_grad():
        if in_channels == 1:
            new.weight.copy_(old.weight.sum(dim=1, keepdim=True))
        else:
            new.weight.copy_(old.weight[:, [c % 3 for c in range(in_channels)]] * (3 / in_channels))
        if old.bias is not None:
            new.bias.copy_(old.bias)
    _set(model, name, new)
    if getattr(model, "transform_input", False):
        model.transform_input = False  # GoogLeNet's and Inception's re-normalization of R, G and B


def _brief(err: Exception) -> str:
    """An error's message on one line, cut to 300 characters."""
    return " ".join(str(err).split())[:300]


def _set(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent), child, module)


def _timm(
    name: str, weights: str | None, in_channels: int, num_classes: int, image_size: int
) -> tuple[nn.Module, Preprocessing | None]:
    try:
        import timm
    except ImportError:
        raise ValueError(f"{name} needs timm: pip install '.[timm]'") from None
    name = name.removeprefix(TIMM)
    arch = name.partition(".")[0]
    if not timm.is_model(arch):
        raise ValueError(hub.unknown("timm model", arch, timm.list_models()))
    sizes = {"num_classes": num_classes, "in_chans": in_channels}
    if weights is None:
        return timm.create_model(name, **sizes), None
    if hub.is_file(weights):
        file = {"file": str(hub.check_file(weights))}
        return timm.create_model(name, pretrained=True, pretrained_cfg_overlay=file, **sizes), None
    if weights != "DEFAULT":
        tags = [n.partition(".")[2] for n in timm.list_pretrained(f"{arch}.*")]
        if weights not in tags:
            raise ValueError(f"timm/{arch} has no weights {weights!r}; its weights: {', '.join(tags)}")
        name = f"{arch}.{weights}"
    if TIMM + name in hub.failed_downloads:  # a second build of this run (see failed_downloads)
        raise ValueError(hub.failed_downloads[TIMM + name])
    try:
        model = timm.create_model(name, pretrained=True, **sizes)
    except (OSError, RuntimeError, ValueError) as err:
        hub.failed_downloads[TIMM + name] = (
            f"timm/{name} weights could not be loaded ({_brief(err)}); they come from the "
            "Hugging Face hub into its cache (HF_HOME): fill it on a machine with network, or pass a file"
        )
        raise ValueError(hub.failed_downloads[TIMM + name]) from err
    config = timm.data.resolve_data_config({}, model=model)
    crop = config["input_size"][-1]
    resize = math.floor(crop / config["crop_pct"])
    mean, std = tuple(config["mean"]), tuple(config["std"])
    return model, Preprocessing(resize, crop, mean, std, config["interpolation"])
