"""A trained network as a greedy policy, for export and for recording videos."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn


class GreedyPolicy(nn.Module):
    """A trained network as a greedy policy: (observations) -> (actions, scores)."""

    def __init__(self, model: nn.Module, num_actions: int, allowed: list[int] | None) -> None:
        super().__init__()
        self.model = model
        self.num_actions = num_actions
        mask = torch.zeros(num_actions, dtype=torch.bool)
        mask[allowed if allowed is not None else list(range(num_actions))] = True
        self.register_buffer("allowed", mask)

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores: torch.Tensor = self.model(observations)
        allowed = self.get_buffer("allowed")
        masked = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        return masked.argmax(dim=1), scores

    @torch.no_grad()
    def act(self, observation: npt.NDArray[Any]) -> int:
        """The greedy action for one observation, as the env gives it."""
        return int(self(torch.from_numpy(np.asarray(observation)[None]))[0][0])
