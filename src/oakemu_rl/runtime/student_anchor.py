"""The anchor to a distilled student: what keeps a run started with `train --init-from`
near the policy it started from while reinforcement learning improves on it.

A policy distilled from the search is good but not perfect; the first updates of PPO (with
a value head that has never been trained) or of DQN (with fresh Q heads) can undo it before
the new learning signal is worth anything. The anchor adds a loss towards the frozen
student whose weight falls linearly to 0 over `init_anchor.decay_steps`, so the run
starts as the student and ends as pure reinforcement learning. With
`init_anchor.value_warmup_steps`, PPO first trains its value head alone, the policy held
at the student, so that its first policy updates follow advantages that mean something.
"""

from __future__ import annotations

import torch
from torch import nn

from .config_base import InitAnchorSettings

__all__ = ["StudentAnchor"]


class StudentAnchor:
    """A frozen student network and the weight of the loss towards it.

    Args:
        student: the distilled student (a network whose forward pass gives the policy's
            logits); it is put in eval mode and never trained.
        settings: the run's `init_anchor` section.
    """

    def __init__(self, student: nn.Module, settings: InitAnchorSettings) -> None:
        self.student = student.eval().requires_grad_(False)
        self.settings = settings

    def coefficient(self, env_steps: int) -> float:
        """The anchor loss's weight after `env_steps`: `coef` through the value warm-up,
        then falling linearly to 0 over `decay_steps`."""
        decaying = max(0, env_steps - self.settings.value_warmup_steps)
        done = min(1.0, decaying / self.settings.decay_steps)
        return self.settings.coef * (1.0 - done)

    def warming_up(self, env_steps: int) -> bool:
        """Whether only the value head learns yet (`value_warmup_steps`, PPO)."""
        return env_steps < self.settings.value_warmup_steps

    @torch.no_grad()
    def log_probs(self, observations: torch.Tensor) -> torch.Tensor:
        """The student's log-probabilities of every action, [rows, actions]."""
        return torch.log_softmax(self.student(observations).float(), dim=-1)

    @torch.no_grad()
    def actions(self, observations: torch.Tensor) -> torch.Tensor:
        """The student's most likely action of each row."""
        actions: torch.Tensor = self.student(observations).argmax(dim=-1)
        return actions

    def kl(self, observations: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
        """KL(student || policy), the mean over rows, where `log_probs` are the policy's
        log-probabilities of every action on `observations` (gradients flow through them)."""
        student = self.log_probs(observations)
        # Actions the student never takes add nothing, whatever the policy's log-probability.
        terms = student.exp() * (student - log_probs)
        return torch.where(student.isfinite(), terms, 0.0).sum(dim=-1).mean()
