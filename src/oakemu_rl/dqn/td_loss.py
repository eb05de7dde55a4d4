"""The DQN loss of a batch of n-step transitions: double DQN, PER weights, Huber."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch.nn import functional as F


class TDLoss(NamedTuple):
    """The loss to minimise and what the learner logs and prioritises with."""

    loss: torch.Tensor
    """Mean of the importance-weighted Huber losses (differentiable)."""
    td_errors: torch.Tensor
    """Q(s, a) - target per transition (detached): the new replay priorities."""
    q_taken: torch.Tensor
    """Q(s, a) per transition (detached)."""


def td_loss(
    q_values: torch.Tensor,
    actions: torch.Tensor,
    returns: torch.Tensor,
    discounts: torch.Tensor,
    next_q_target: torch.Tensor,
    next_q_online: torch.Tensor | None,
    weights: torch.Tensor,
    *,
    huber_delta: float,
    action_mask: torch.Tensor | None = None,
) -> TDLoss:
    """The TD loss of a batch.

    target = returns + discounts * Q_target(s', a'), where `returns` is the discounted
    sum of the n rewards, `discounts` is gamma^n (0 when the episode terminated within
    them) and a' = argmax Q_online(s') (double DQN) or argmax Q_target(s') (DQN, when
    `next_q_online` is None).

    Args:
        q_values: online Q values of the observations, [batch, actions], with gradients.
        actions: the actions taken, [batch].
        returns: discounted n-step reward sums, [batch].
        discounts: gamma^n, 0 for terminated transitions, [batch].
        next_q_target: target-network Q values of the n-th next observations.
        next_q_online: online Q values of those observations (None: plain DQN).
        weights: importance-sampling weights (ones without prioritized replay), [batch].
        huber_delta: where the Huber loss turns from quadratic to linear.
        action_mask: added to the Q values that choose a' (-inf for actions not allowed).
    """
    q_taken = q_values.gather(1, actions.unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        chooser = next_q_target if next_q_online is None else next_q_online
        if action_mask is not None:
            chooser = chooser + action_mask
        next_actions = chooser.argmax(dim=1, keepdim=True)
        next_q = next_q_target.gather(1, next_actions).squeeze(1)
        targets = returns + discounts * next_q
        td_errors = q_taken.detach() - targets
    losses = F.huber_loss(q_taken, targets, reduction="none", delta=huber_delta)
    return TDLoss((weights * losses).mean(), td_errors, q_taken.detach())
