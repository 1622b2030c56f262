"""``--model.freeze``: which parameters stay fixed, until which epoch, and how that holds under DDP.

Lightning's ``BaseFinetuning`` freezes with ``requires_grad=False`` and, at the unfreeze epoch, turns it
back on and adds a parameter group to the optimizer. Under DDP that breaks: the reducer's buckets are
built at wrap time from the parameters that then required grad, so the ones turned on later are never
all-reduced and the ranks drift apart (Lightning issue 20340). Here the set of trainable tensors and
the optimizer's groups never change: frozen tensors sit in their own group at lr 0 and weight decay 0,
their gradients are dropped before each step (so the optimizer keeps no state for them either: no
momentum, no Adam moments), and unfreezing only changes that group's lr. ``requires_grad=False`` is used
only when no unfreeze is planned, where it saves computing the gradients.
"""

# workaround: Lightning issue 20340; gone when DDP all-reduces the parameters BaseFinetuning unfreezes

import fnmatch
from collections.abc import Iterator, Sequence

from torch import nn
from torch.optim import Optimizer

from models.errors import ModelError
from models.nets.net import classifier

BACKBONE = "backbone"  # every parameter but the classifier's
NORMS = (nn.modules.batchnorm._BatchNorm,)
SHOWN = 8  # module names listed when a pattern matches nothing


def frozen_names(net: nn.Module, patterns: Sequence[str]) -> set[str]:
    """The parameter names of ``net`` that ``patterns`` freeze.

    ``backbone`` is every parameter outside the classifier (the last linear or 1x1 convolution
    layer, found as Backbone finds the one it replaces); other patterns are fnmatch patterns matched
    against parameter names (``features.0.weight``) and module names (``features.0``: all of its).
    """
    params = [name for name, _ in net.named_parameters()]
    modules = [name for name, _ in net.named_modules() if name]
    chosen: set[str] = set()
    for pattern in patterns:
        if pattern == BACKBONE:
            head = classifier(net)[0]
            found = {p for p in params if not p.startswith(f"{head}.")}
        else:
            pattern = pattern.removeprefix("net.")
            hit = [m for m in modules if fnmatch.fnmatchcase(m, pattern)]
            found = {
                p
                for p in params
                if fnmatch.fnmatchcase(p, pattern) or any(p.startswith(f"{m}.") for m in hit)
            }
        if not found:
            more = f", ... ({len(modules)} in all)" if len(modules) > SHOWN else ""
            raise ModelError(
                f"--model.freeze {pattern!r} matches no parameter of {type(net).__name__}; its modules: "
                f"{', '.join(modules[:SHOWN])}{more} (or 'backbone': all but the classifier)"
            )
        chosen |= found
    if chosen == set(params):
        raise ModelError(f"--model.freeze {list(patterns)} freezes every parameter: nothing would train")
    return chosen


class Freezing:
    """Frozen parameters of a network, held fixed until ``unfreeze_at_epoch`` (never if None).

    Args:
        net: the network.
        patterns: what ``--model.freeze`` names (see :func:`frozen_names`).
        unfreeze_at_epoch: the first epoch that trains them; None keeps them frozen for good.
        lr_ratio: their lr once unfrozen, as a fraction of the other parameters' lr.
    """

    def __init__(
        self, net: nn.Module, patterns: Sequence[str], unfreeze_at_epoch: int | None, lr_ratio: float
    ) -> None:
        self.net = net
        self.names = frozen_names(net, patterns)
        self.unfreeze_at_epoch, self.lr_ratio = unfreeze_at_epoch, lr_ratio
        for name, param in net.named_parameters():
            if name in self.names and unfreeze_at_epoch is None:
                param.requires_grad_(False)
        # A norm layer is frozen when all its parameters are (or, without parameters, when its name is).
        self.norms = [
            m
            for n, m in net.named_modules()
            if isinstance(m, NORMS)
            and all(f"{n}.{p}" in self.names for p, _ in m.named_parameters())
            and (any(True for _ in m.parameters()) or any(fnmatch.fnmatchcase(n, p) for p in patterns))
        ]

    def describe(self) -> str:
        """One line: how many tensors are frozen, and until when."""
        count = sum(p.numel() for n, p in self.net.named_parameters() if n in self.names)
        what = f"{len(self.names)} tensors ({count:,} parameters)"
        if self.unfreeze_at_epoch == 0:
            return f"freeze: none ({what} trained at {self.lr_ratio:g} x lr from epoch 0)"
        until = "for good" if self.unfreeze_at_epoch is None else f"until epoch {self.unfreeze_at_epoch}"
        lr = "" if self.unfreeze_at_epoch is None else f", then trained at {self.lr_ratio:g} x lr"
        return f"freeze: {what} and {len(self.norms)} norm layers' statistics frozen {until}{lr}"

    def frozen(self, epoch: int) -> bool:
        return self.unfreeze_at_epoch is None or epoch < self.unfreeze_at_epoch

    def set_lrs(self, optimizer: Optimizer, epoch: int) -> None:
        """Give the frozen groups lr 0 and no weight decay while frozen, else the first group's lr x
        ``lr_ratio`` and their own weight decay (the schedule sets the others': call after its steps)."""
        first = optimizer.param_groups[0]["lr"]
        frozen = self.frozen(epoch)
        for group in optimizer.param_groups:
            if group.get("frozen"):
                group["lr"] = 0.0 if frozen else first * self.lr_ratio
                group["weight_decay"] = 0.0 if frozen else group["decay"]

    def drop_grads(self, epoch: int) -> None:
        """Before a step, while frozen: no gradient, so SGD skips them (no update, no momentum)."""
        if self.frozen(epoch):
            for param in self._params():
                param.grad = None

    def set_modes(self, epoch: int) -> None:
        """Frozen norm layers in eval mode (running statistics fixed); in train mode once unfrozen."""
        frozen = self.frozen(epoch)
        for norm in self.norms:
            norm.train(not frozen and self.net.training)

    def _params(self) -> Iterator[nn.Parameter]:
        return (p for n, p in self.net.named_parameters() if n in self.names)
