"""WeightAverage: an exponential moving average of a trained network's weights, kept in a
second network of the same architecture (Polyak averaging).

A network trained with a constant learning rate on a growing dataset swings from one
update to the next; the average of its recent weights is an ensemble over time that
costs no more updates and nothing more at play time.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["WeightAverage"]

#: The warm-up: the average's n-th update keeps (1 + n) / (WARMUP + n) of it at most, so
#: that a young average follows the trained weights instead of its initialisation.
WARMUP = 10


class WeightAverage:
    """Moves an average network towards a trained one, one update at a time.

    Each `update` keeps ``min(decay, (1 + n) / (10 + n))`` of the average and takes the
    rest from the trained weights, n being the updates so far; floating-point buffers are
    averaged as the weights are, others copied.

    Args:
        decay: the share of the average kept at each update once warmed up (0 < decay < 1).
    """

    def __init__(self, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay must lie strictly between 0 and 1, not {decay}")
        self.decay = float(decay)
        self.count = 0

    def current_decay(self) -> float:
        """The share of the average the next update keeps."""
        return min(self.decay, (1 + self.count) / (WARMUP + self.count))

    @torch.no_grad()
    def update(self, average: nn.Module, trained: nn.Module) -> None:
        """Move `average`'s weights (in place) towards `trained`'s."""
        weight = 1.0 - self.current_decay()
        averaged, current = average.state_dict(), trained.state_dict()
        if averaged.keys() != current.keys():
            raise ValueError(
                "WeightAverage: the average's weights differ from the trained network's"
            )
        for name, tensor in averaged.items():
            if tensor.is_floating_point():
                tensor.lerp_(current[name], weight)
            else:
                tensor.copy_(current[name])
        self.count += 1

    def restart(self, count: int = 0) -> None:
        """Set the number of updates so far (0: the next update nearly copies)."""
        self.count = int(count)
