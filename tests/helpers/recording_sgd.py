"""An optimizer that writes down what each of its steps trained with."""

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import torch


class RecordingSGD(torch.optim.SGD):
    """torch's SGD that appends one JSON line per step to ``record``: each parameter group's lr,
    momentum and weight decay as the step used them."""

    def __init__(
        self,
        params: Iterable,
        record: str,
        lr: float = 1e-3,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
        self.record = Path(record)

    def step(self, closure: Callable | None = None):
        loss = super().step(closure)
        groups = [{k: group[k] for k in ("lr", "momentum", "weight_decay")} for group in self.param_groups]
        with self.record.open("a") as file:
            file.write(json.dumps(groups) + "\n")
        return loss
