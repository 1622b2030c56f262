"""``--model.init_from``: start a new run from the matching tensors of a checkpoint or weights file."""

from pathlib import Path

import torch
from torch import Tensor, nn

from models.errors import ModelError

# Prefixes a saved name may carry around the network's own names: the LightningModule's attribute,
# torch.compile's wrapper, DataParallel/DDP's wrapper.
PREFIXES = ("net.", "_orig_mod.", "module.")
SHOWN = 3  # skipped tensors named in the summary line


def read(path: str) -> dict[str, Tensor]:
    """The tensors of a checkpoint (``state_dict`` inside), a plain state_dict or a safetensors file."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ModelError(f"--model.init_from {path}: no such file")
    try:
        if file.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(file)
        else:
            state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # torch.load raises many types for a file it cannot read
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(f"--model.init_from {path}: cannot read it as weights ({first})") from err
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]  # a Lightning checkpoint
    if not isinstance(state, dict) or not any(isinstance(v, Tensor) for v in state.values()):
        raise ModelError(f"--model.init_from {path} holds no tensors (a checkpoint or a state_dict file)")
    return {k: v for k, v in state.items() if isinstance(k, str) and isinstance(v, Tensor)}


def _bare(name: str) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in PREFIXES:
            if name.startswith(prefix):
                name, changed = name[len(prefix) :], True
    return name


def _mapped(source: dict[str, Tensor], target: dict[str, Tensor]) -> dict[str, Tensor]:
    """``source`` renamed to ``target``'s names: wrappers' prefixes dropped, then, whichever fits more
    names, as they are or under one leading module of the target (Backbone's ``model.``: a torchvision
    or timm file names the inner model's tensors)."""
    bare = {_bare(k): v for k, v in source.items()}
    firsts = {k.split(".", 1)[0] + "." for k in target if "." in k}
    candidates = [bare, *({f"{p}{k}": v for k, v in bare.items()} for p in sorted(firsts))]
    return max(candidates, key=lambda c: len(c.keys() & target.keys()))


def _shape(t: Tensor) -> str:
    return "x".join(map(str, t.shape)) or "scalar"


def load(net: nn.Module, path: str, prefix: str = "net.") -> str:
    """Copy into ``net`` every tensor of ``path`` whose name and shape match; returns the summary line.

    Raises:
        ModelError: the file is missing or unreadable, or few of its tensors fit ``net``.
    """
    target = net.state_dict()
    source = _mapped(read(path), target)
    fits = {k: v for k, v in source.items() if k in target and v.shape == target[k].shape}
    differ = [
        f"{prefix}{k}: shape {_shape(source[k])} in the file vs {_shape(v)} here"
        for k, v in target.items()
        if k in source and k not in fits
    ]
    if not fits or len(differ) > len(fits):
        # Most shared names with other shapes (a head, a first layer may differ; not most layers).
        found = (
            f"{len(fits)} of its {len(source)} tensors fit"
            if fits
            else f"none of its {len(source)} tensors fits"
        )
        why = (
            f"; {', '.join(differ[:SHOWN])}"
            if differ
            else f" (it has {', '.join(list(source)[:SHOWN])}, ...)"
        )
        raise ModelError(
            f"--model.init_from {path}: {found} {type(net).__name__} by name and shape{why}: "
            "weights of another architecture?"
        )
    skipped = differ + [f"{prefix}{k}: not in the file" for k in target if k not in source]
    net.load_state_dict(fits, strict=False)
    unused = len(source.keys() - target.keys())
    line = f"init_from {path}: loaded {len(fits)}/{len(target)} tensors"
    if skipped:
        more = f", and {len(skipped) - SHOWN} more" if len(skipped) > SHOWN else ""
        line += f"; skipped {', '.join(skipped[:SHOWN])}{more}"
    return line + (f"; {unused} tensors of the file unused" if unused else "")
