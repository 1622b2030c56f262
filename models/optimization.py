"""The optimizer and lr schedule a config names, fitted to the run.

``--model.optimizer`` and ``--model.scheduler`` are LightningCLI callables (class_path + init_args):
this module gives them the parameter groups (frozen, without weight decay), scales every learning
rate to the world size, and passes a schedule its length.
"""

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau

from models.errors import ModelError
from models.schedules import LENGTHS

# Scheduler arguments that are learning rates: scaled with the optimizer's lr.
LRS = ("max_lr", "base_lr", "eta_min", "min_lr")
NORMS = (nn.modules.batchnorm._BatchNorm, nn.GroupNorm, nn.LayerNorm, nn.modules.instancenorm._InstanceNorm)


def class_of(factory: Callable) -> type | None:
    """The class a callable builds: a class, or the class a ``functools.partial`` wraps (jsonargparse
    gives a partial of its instantiator, the class and the init args)."""
    if inspect.isclass(factory):
        return factory
    if isinstance(factory, functools.partial):
        return next((c for c in (factory.func, *factory.args) if inspect.isclass(c)), None)
    return None


def plain(factory: Callable) -> Callable:
    """``functools.partial(cls, **init_args)`` for a class built by jsonargparse's partial, whose
    instantiator can hold the CLI (so a copy of the model, such as EMA's average, could not be made)."""
    cls = class_of(factory)
    return functools.partial(cls, **given(factory)) if cls is not None and cls is not factory else factory


def given(factory: Callable) -> dict[str, Any]:
    """The keyword arguments a callable was configured with (none for a plain class)."""
    return dict(factory.keywords) if isinstance(factory, functools.partial) else {}


def param_groups(net: nn.Module, frozen: set[str], norm_weight_decay: float | None) -> list[dict]:
    """The optimizer's parameter groups: trained, then ``frozen`` (see ``Freezing``), each split where
    ``norm_weight_decay`` is set: the norm layers' weights and every bias get that weight decay instead
    of the optimizer's. Each group says whether it is ``frozen``."""
    norm_params = {
        f"{m}.{p}" if m else p
        for m, module in net.named_modules()
        if isinstance(module, NORMS)
        for p, _ in module.named_parameters(recurse=False)
    }
    groups: dict[tuple[bool, bool], list[nn.Parameter]] = {}
    for name, param in net.named_parameters():
        exempt = norm_weight_decay is not None and (name in norm_params or name.endswith("bias"))
        groups.setdefault((name in frozen, exempt), []).append(param)
    return [
        {"params": params, "frozen": is_frozen, **({"weight_decay": norm_weight_decay} if exempt else {})}
        for (is_frozen, exempt), params in sorted(groups.items())
    ]


def build_optimizer(factory: Callable, groups: list[dict], factor: float) -> Optimizer:
    """``factory(groups)`` with every group's lr multiplied by ``factor`` (see ``lr_scaling``); each
    group keeps its weight decay as ``decay``, for a frozen group to get it back when unfrozen."""
    optimizer = factory(groups)
    for group in optimizer.param_groups:
        group["lr"] *= factor
        group["decay"] = group.get("weight_decay", 0.0)
    return optimizer


def build_scheduler(factory: Callable, optimizer: Optimizer, length: int, factor: float) -> LRScheduler:
    """``factory(optimizer)`` with the run's ``length`` where the class takes one, and its
    learning-rate arguments (``max_lr``, ``eta_min``...) scaled by ``factor`` like the optimizer's."""
    cls = class_of(factory)
    params = inspect.signature(cls).parameters if cls else {}
    kwargs, set_ = {}, given(factory)
    for name in LENGTHS:
        if name in params and set_.get(name) is None:
            kwargs[name] = length
    for name in LRS:
        value = set_.get(name, params[name].default if name in params else None)
        if isinstance(value, int | float) and value:
            kwargs[name] = value * factor
        elif isinstance(value, list | tuple):
            kwargs[name] = [v * factor for v in value]
    return factory(optimizer, **kwargs)


def base_lr(optimizer: Callable) -> float | None:
    """The lr an optimizer callable was given, else its class's default; None where it takes none."""
    lr = given(optimizer).get("lr")
    cls = class_of(optimizer)
    if lr is None and cls is not None:
        lr = inspect.signature(cls).parameters.get("lr", inspect.Parameter.empty).default
    return lr if isinstance(lr, int | float) else None


def stretch(scheduler: LRScheduler, planned: int, plan: dict) -> str:
    """Make a resumed schedule end at ``plan["length"]`` instead of ``planned``; the line that says so.

    Set at the restored lr, a cosine's length only shapes what is left of it: it goes on from that lr
    to its floor at the new end. Other schedules of a fixed length cannot: a :class:`ModelError`.
    """
    length, unit = plan["length"], plan["interval"]
    if hasattr(scheduler, "set_length"):
        scheduler.set_length(length)
    elif isinstance(scheduler, torch.optim.lr_scheduler.CosineAnnealingLR):
        scheduler.T_max = length
    else:
        raise ModelError(
            f"{type(scheduler).__name__} was planned for {planned} {unit}s and cannot be stretched to this "
            f"run's {length}: resume with the run's length, or start a new run from its weights with "
            "--model.init_from"
        )
    lr = scheduler.optimizer.param_groups[0]["lr"]
    return (
        f"lr schedule: this run now ends at {unit} {length} (planned: {planned}); the cosine goes on "
        f"from lr {lr:.4g} to its floor there"
    )


def try_out(optimizer: Callable, scheduler: Callable | None, monitor: str, monitored: Sequence[str]) -> None:
    """Build the optimizer and schedule once on a stand-in parameter: a value they refuse (a negative
    lr, OneCycleLR without max_lr), or a ReduceLROnPlateau ``monitor`` not among the ``monitored``
    metrics, is a one-line :class:`ModelError` before anything runs."""
    chosen = class_of(scheduler) if scheduler is not None else None
    if chosen is not None and issubclass(chosen, ReduceLROnPlateau) and monitor not in monitored:
        raise ModelError(
            f"--model.scheduler_monitor {monitor} is never logged: ReduceLROnPlateau can watch "
            f"{', '.join(monitored)}"
        )
    for name, build in (("optimizer", optimizer), ("scheduler", scheduler)):
        try:
            if name == "optimizer":
                built = build([nn.Parameter(torch.zeros(1))])
            elif build is not None:
                build_scheduler(build, built, length=2, factor=1.0)
        except (ValueError, TypeError) as err:
            cls = class_of(build)
            raise ModelError(f"--model.{name} {cls.__name__ if cls else build}: {err}") from None


def steps_per_validation(scheduler: object) -> bool:
    """Whether a scheduler steps on a validation metric (ReduceLROnPlateau) rather than on time."""
    return isinstance(scheduler, ReduceLROnPlateau)
