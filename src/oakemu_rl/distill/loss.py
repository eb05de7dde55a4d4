"""The distillation loss: cross-entropy of the student's policy against soft targets."""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["LOSSES", "safe_set_nll", "soft_cross_entropy"]


def soft_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """The mean over rows of ``-sum_a targets[a] * log_softmax(logits)[a]``.

    Args:
        logits: the student's action logits, (batch, actions).
        targets: the teacher's action distributions, (batch, actions), rows summing to 1.
        weights: a weight per row (None: every row alike); the mean is then weighted.

    Returns:
        The loss, a scalar tensor. Its minimum over logits is the targets' entropy (reached
        where the student's policy equals the target), so a soft target is matched rather
        than pushed to its argmax.
    """
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    # An action with no target mass adds nothing, even where its log-probability is -inf.
    terms = torch.where(targets > 0, targets * log_probs, torch.zeros_like(log_probs))
    return _mean(-terms.sum(dim=-1), weights)


def safe_set_nll(
    logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """The mean over rows of ``-log sum_{a: targets[a] > 0} softmax(logits)[a]``: the
    student is asked to put its mass on the actions the teacher allows, not to split it as
    the teacher's target does, so it may prefer one of several safe moves.

    Args and Returns as `soft_cross_entropy`'s; a row whose every action has mass adds 0.
    """
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    allowed = torch.where(targets > 0, log_probs, torch.full_like(log_probs, -torch.inf))
    return _mean(-torch.logsumexp(allowed, dim=-1), weights)


def _mean(per_row: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """The mean of `per_row`, weighted by `weights` where given."""
    if weights is None:
        return per_row.mean()
    return (weights * per_row).sum() / weights.sum()


LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "cross_entropy": soft_cross_entropy,
    "safe_set": safe_set_nll,
}
"""Each `distill.loss` by name."""
