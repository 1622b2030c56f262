"""This process's random generator states, as checkpoint content (see ``LastCheckpoint``)."""

import random
from typing import Any

import numpy as np
import torch


def collect() -> dict[str, Any]:
    """This process's generator states."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    # Tensors and plain values only, so the checkpoint still loads with torch.load(weights_only=True).
    numpy = [kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, gauss]
    states = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": numpy}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore(states: dict[str, Any]) -> None:
    """Put back what :func:`collect` returned."""
    torch.set_rng_state(states["torch"])
    random.setstate(states["python"])
    kind, keys, position, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
