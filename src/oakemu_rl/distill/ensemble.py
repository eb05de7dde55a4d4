"""StudentEnsemble: several students trained apart, acting on the mean of their policies.

Each member is a `PPOModel` of the configured kind, initialised on its own and trained on
minibatches of its own (`DistillLearner` draws one for each), so their errors differ; the
mean of their action probabilities is then wrong less often than any one of them. What
acts, is evaluated, checkpointed and exported is the whole ensemble, at the members'
cost in compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ..ppo.model import PPOModel

__all__ = ["Student", "StudentEnsemble"]


class StudentEnsemble(nn.Module):
    """`len(members)` students whose policy is the mean of theirs.

    `forward` returns the log of the mean of the members' action probabilities (logits of
    the ensemble's policy, as `PPOModel.forward` returns its own), so greedy play, the
    tester and ONNX export treat it as one network.

    Args:
        members: the students, at least 2, alike in observation shape and actions.
    """

    def __init__(self, members: Sequence[PPOModel]) -> None:
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least 2 members, got {len(members)}")
        first = members[0]
        if any(
            (m.observation_shape, m.num_actions) != (first.observation_shape, first.num_actions)
            for m in members
        ):
            raise ValueError("the members of an ensemble must see and act alike")
        self.members = nn.ModuleList(members)
        self.observation_shape = first.observation_shape
        self.num_actions = first.num_actions

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """Log of the mean of the members' action probabilities, (batch, actions)."""
        log_probs = torch.stack([torch.log_softmax(m(observations), dim=-1) for m in self.members])
        return torch.logsumexp(log_probs, dim=0) - math.log(len(self))

    @torch.no_grad()
    def greedy_actions(self, observations: torch.Tensor) -> torch.Tensor:
        """The most likely action of the mean policy for each observation."""
        return self.forward(observations).argmax(dim=-1)

    def __len__(self) -> int:
        return len(self.members)


Student = PPOModel | StudentEnsemble
"""What a distillation run trains and acts with: one student, or an ensemble of them."""
