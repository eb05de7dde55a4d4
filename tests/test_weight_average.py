"""WeightAverage: the moving average of a trained network's weights, with its warm-up."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from oakemu_rl.runtime.weight_average import WeightAverage


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.register_buffer("seen", torch.zeros((), dtype=torch.long))


def test_the_average_keeps_its_decay_after_a_warm_up_and_copies_integer_buffers() -> None:
    torch.manual_seed(0)
    average, trained = _Net(), _Net()
    expected = average.linear.weight.detach().double().clone()
    ema = WeightAverage(0.9)
    for n in range(90):
        with torch.no_grad():
            trained.linear.weight.normal_()
            trained.seen.fill_(n)
        kept = min(0.9, (1 + n) / (10 + n))
        assert ema.current_decay() == pytest.approx(kept)
        ema.update(average, trained)
        expected = kept * expected + (1 - kept) * trained.linear.weight.detach().double()
        torch.testing.assert_close(average.linear.weight.double(), expected, rtol=0, atol=1e-5)
        assert int(average.seen) == n
    assert ema.count == 90 and ema.current_decay() == 0.9
    # The first update of a restarted average takes nine tenths of the trained weights.
    ema.restart()
    assert ema.current_decay() == pytest.approx(0.1)


def test_a_decay_outside_zero_to_one_and_a_different_network_are_refused() -> None:
    for decay in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            WeightAverage(decay)
    with pytest.raises(ValueError, match="differ"):
        WeightAverage(0.5).update(_Net(), nn.Linear(3, 2))
