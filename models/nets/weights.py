"""Pretrained weights files: torch's hub cache, one download per node, one-line errors."""

import difflib
import os
import time
from pathlib import Path
from urllib.parse import urlparse

import torch
import torch.distributed as dist

WAIT_S = 1800.0
SUFFIXES = {".pt", ".pth", ".bin", ".ckpt", ".safetensors"}
# jsonargparse builds a network again for each type of a Union (``Net | nn.Module``) when the first
# raises; the errors of failed downloads, by URL or timm name, keep that build from trying again.
failed_downloads: dict[str, str] = {}


def local_rank() -> int:
    """This process's rank on its node: ``LOCAL_RANK`` (torchrun, Lightning) or ``SLURM_LOCALID``."""
    return int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", 0)))


def cache_path(url: str) -> Path:
    """Where ``torch.hub`` keeps the file of ``url``: ``$TORCH_HOME/hub/checkpoints/<file name>``."""
    return Path(torch.hub.get_dir()) / "checkpoints" / Path(urlparse(url).path).name


def fetch(url: str) -> Path:
    """The cached file of ``url``; where missing, local rank 0 downloads it and the other ranks wait.

    They wait at a barrier when torch.distributed is initialized, else until the file appears
    (the download lands under a temporary name and is renamed when complete). Lightning's ddp
    launcher builds the model in rank 0 before it starts the other ranks, which then find the file.

    Raises:
        ValueError: the file is not cached and could not be downloaded.
    """
    path = cache_path(url)
    if path.exists():
        return path
    reason = failed_downloads.get(url, "local rank 0 could not download it")
    if local_rank() == 0 and url not in failed_downloads:
        try:
            torch.hub.load_state_dict_from_url(url, map_location="cpu", check_hash=True, weights_only=True)
        except (OSError, RuntimeError) as err:
            reason = failed_downloads[url] = f"download failed: {err}"
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    elif local_rank() != 0:
        wait_for(path)
    if not path.exists():
        raise ValueError(
            f"no weights file {path.name} in {path.parent} ({reason}); fetch {url} on a machine with "
            f"network and copy it into that folder ($TORCH_HOME/hub/checkpoints; TORCH_HOME moves it), "
            "or pass --model.net.weights path/to/state_dict.pth"
        )
    return path


def wait_for(path: Path, timeout: float = WAIT_S, every: float = 0.5) -> None:
    """Return once ``path`` exists, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(every)


def is_file(weights: str) -> bool:
    """Whether ``weights`` names a file rather than weights by name (``DEFAULT``, ``IMAGENET1K_V1``)."""
    path = Path(weights)
    return "/" in weights or os.sep in weights or path.suffix in SUFFIXES or path.exists()


def check_file(weights: str) -> Path:
    """``weights`` as an existing file's path; ValueError otherwise."""
    path = Path(weights).expanduser()
    if not path.is_file():
        raise ValueError(f"no weights file {path}: --model.net.weights takes a weights name or a file")
    return path


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """A plain state_dict saved with ``torch.save``; ValueError for anything else."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch.load raises many types for a file it cannot read
        raise ValueError(f"cannot read {path} as a torch state_dict: {str(err).splitlines()[0]}") from err
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path} holds no plain state_dict (a dict of tensors: torch.save(m.state_dict()))")
    return state


def unknown(kind: str, name: str, names: list[str]) -> str:
    """The one-line message for a model name not in ``names``, with the close matches."""
    close = difflib.get_close_matches(name, names, n=6, cutoff=0.5)
    return f"unknown {kind} {name!r}; close: {', '.join(close) if close else 'none'}"
