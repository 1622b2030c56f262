"""The values a logging step wants on the host, read in one copy: one wait for the device."""

from collections.abc import Callable

import torch


class LogStepRead:
    """Device tensors wanted on the host at the next :meth:`read`, each with what receives its values.

    Between reads nothing waits for the device; a read copies every wanted tensor at once, so the
    loss logged, the NaN stop's state and whatever else a logging step shows cost one sync together.
    """

    def __init__(self) -> None:
        self.wanted: list[tuple[torch.Tensor, Callable[[list[float]], None]]] = []

    def want(self, tensor: torch.Tensor, receive: Callable[[list[float]], None]) -> None:
        """Read ``tensor`` at the next :meth:`read` and give its values, flattened, to ``receive``."""
        self.wanted.append((tensor.detach(), receive))

    def read(self) -> None:
        """Copy every wanted tensor to the host in one go, then call each receiver in order."""
        if not self.wanted:
            return
        wanted, self.wanted = self.wanted, []
        # float64 holds the float32 losses and integer step indices below 2**53 exactly.
        values = torch.cat([t.reshape(-1).double() for t, _ in wanted]).tolist()
        start = 0
        for tensor, receive in wanted:
            receive(values[start : start + tensor.numel()])
            start += tensor.numel()
