"""PPOModel: a shared torso (a CNN of `runtime.torsos`, or an MLP), a policy and a value head."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

import torch
from torch import nn

from ..runtime.torsos import TorsoName, cnn_torso, resolve_torso

__all__ = ["ActionBundle", "PPOModel", "PolicyEvaluation"]

#: The logit given to masked actions: finite, so entropies and KLs stay finite.
MASKED_LOGIT = -1e8

#: Added to the returns' variance before its square root is taken (value normalisation).
VALUE_VARIANCE_EPS = 1e-5


class ActionBundle(NamedTuple):
    """What the actor needs for a batch of observations (all tensors of batch size)."""

    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    entropy: torch.Tensor


class PolicyEvaluation(NamedTuple):
    """The policy on a batch of observations and actions taken there (for the update)."""

    log_probs: torch.Tensor
    """Log-probabilities of the actions taken."""
    entropy: torch.Tensor
    values: torch.Tensor
    """In the value head's units (normalised with value normalisation)."""
    action_log_probs: torch.Tensor
    """Log-probabilities of every action, [batch, actions]."""


def _init(layer: nn.Module, gain: float = math.sqrt(2), bias: float = 0.0) -> nn.Module:
    if isinstance(layer, nn.Linear | nn.Conv2d):
        nn.init.orthogonal_(layer.weight, gain)
        if layer.bias is not None:
            nn.init.constant_(layer.bias, bias)
    return layer


def _entropy(log_probs: torch.Tensor) -> torch.Tensor:
    """Entropy of categorical distributions given their log-probabilities (masked ones ~ -1e8)."""
    return -(log_probs.exp() * log_probs).sum(dim=-1)


def _sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One action per row, by inverse-CDF sampling (cheaper than torch.multinomial for
    small batches). Actions of probability 0 are never drawn: row i takes the first
    action whose cumulative probability exceeds u * total, with u uniform in [0, 1)."""
    cdf = probs.cumsum(dim=-1)
    device = generator.device if generator is not None else probs.device
    u = torch.rand((probs.shape[0], 1), generator=generator, device=device).to(probs.device)
    return (cdf <= u * cdf[:, -1:]).sum(dim=-1)


class PPOModel(nn.Module):
    """An actor-critic network over discrete actions, with action masking.

    Observations are channels-first images (C, H, W) or vectors; they are multiplied
    by `input_scale` inside the model (1/255 for uint8 by default), so actors and
    buffers keep the env's dtype. `forward` returns the masked policy logits (what
    greedy play and ONNX export need); `get_action_bundle` samples actions and returns
    their log-probabilities, the values and the entropies in one pass. With
    `value_normalization` the value head learns normalised returns; `get_action_bundle`
    and `get_value` give values in the rewards' units all the same.

    Args:
        observation_shape: shape of one observation (no batch dimension).
        num_actions: number of actions.
        torso: 'small_cnn', 'nature_cnn', 'cell_cnn', 'mlp' or 'auto' (small_cnn for
            3-D shapes, else mlp); see `oakemu_rl.runtime.torsos`.
        mlp_hidden: hidden sizes of the MLP torso.
        cnn_features: units of the linear layer after a CNN torso.
        activation: activation of the MLP torso.
        input_scale: observations are multiplied by this (None: 1/255 for uint8 inputs).
        allowed_actions: the actions the policy may take (None: all); others are masked.
        value_normalization: the value head predicts returns normalised by running
            statistics (PopArt; see `update_value_statistics`), kept in the buffer
            `value_stats` (count, mean, variance) and saved with the weights.
    """

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        *,
        torso: TorsoName = "auto",
        mlp_hidden: Sequence[int] = (64, 64),
        cnn_features: int = 256,
        activation: Literal["tanh", "relu"] = "tanh",
        input_scale: float | None = None,
        allowed_actions: Sequence[int] | None = None,
        value_normalization: bool = False,
    ) -> None:
        super().__init__()
        shape = tuple(int(s) for s in observation_shape)
        if num_actions < 1:
            raise ValueError(f"num_actions must be at least 1, got {num_actions}")
        torso = resolve_torso(torso, shape)
        self.observation_shape = shape
        self.num_actions = num_actions
        self.torso_name = torso
        self.input_scale = input_scale
        if torso == "mlp":
            act: type[nn.Module] = nn.Tanh if activation == "tanh" else nn.ReLU
            layers: list[nn.Module] = [nn.Flatten()]
            size = math.prod(shape)
            for width in mlp_hidden:
                layers += [_init(nn.Linear(size, width)), act()]
                size = width
            self.torso = nn.Sequential(*layers)
            features = size
        else:
            cnn = cnn_torso(torso, shape[0], init=_init)
            with torch.no_grad():
                flat = int(cnn(torch.zeros(1, *shape)).shape[1])
            self.torso = nn.Sequential(cnn, _init(nn.Linear(flat, cnn_features)), nn.ReLU())
            features = cnn_features
        self.policy_head = _init(nn.Linear(features, num_actions), gain=0.01)
        self.value_head = _init(nn.Linear(features, 1), gain=1.0)
        mask = torch.zeros(num_actions, dtype=torch.bool)
        if allowed_actions is None:
            mask[:] = True
        else:
            indices = sorted({int(a) for a in allowed_actions})
            if not indices or any(not 0 <= a < num_actions for a in indices):
                raise ValueError(
                    f"allowed actions {list(allowed_actions)} must be a non-empty subset of "
                    f"0..{num_actions - 1}"
                )
            mask[indices] = True
        self._restricts = not bool(mask.all())
        self.register_buffer("action_mask", mask, persistent=False)
        self.action_mask: torch.Tensor
        self.value_normalization = value_normalization
        if value_normalization:
            stats = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)  # count, mean, variance
            self.register_buffer("value_stats", stats)
            self.value_stats: torch.Tensor

    # -- passes -------------------------------------------------------------------------

    def _features(self, observations: torch.Tensor) -> torch.Tensor:
        x = observations.float()
        scale = self.input_scale
        if scale is None:
            scale = 1.0 / 255.0 if observations.dtype == torch.uint8 else 1.0
        if scale != 1.0:
            x = x * scale
        features: torch.Tensor = self.torso(x)
        return features

    def _mask(self, logits: torch.Tensor, action_mask: torch.Tensor | None) -> torch.Tensor:
        if action_mask is None:
            if self._restricts:
                return logits.masked_fill(~self.action_mask, MASKED_LOGIT)
            return logits
        mask = self.action_mask & action_mask.to(torch.bool)
        return logits.masked_fill(~mask, MASKED_LOGIT)

    def policy_and_value(
        self, observations: torch.Tensor, action_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked logits (batch, actions) and values (batch,) in the value head's units."""
        features = self._features(observations)
        logits = self._mask(self.policy_head(features), action_mask)
        values = self.value_head(features).squeeze(-1)
        return logits, values

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """The masked policy logits."""
        return self.policy_and_value(observations)[0]

    def get_value(self, observations: torch.Tensor) -> torch.Tensor:
        """State values (batch,), in the rewards' units."""
        values: torch.Tensor = self.value_head(self._features(observations)).squeeze(-1)
        return self.denormalize_values(values)

    # -- value normalisation (PopArt) ----------------------------------------------------

    def value_moments(self) -> tuple[float, float]:
        """The mean and standard deviation that value-head outputs are in units of
        ((0, 1) without value normalisation)."""
        if not self.value_normalization:
            return 0.0, 1.0
        _, mean, variance = self.value_stats.tolist()
        return mean, math.sqrt(variance + VALUE_VARIANCE_EPS)

    def normalize_values(self, values: torch.Tensor) -> torch.Tensor:
        """Values in the rewards' units -> the value head's units."""
        if not self.value_normalization:
            return values
        mean, std = self.value_moments()
        return (values - mean) / std

    def denormalize_values(self, values: torch.Tensor) -> torch.Tensor:
        """The value head's outputs -> values in the rewards' units."""
        if not self.value_normalization:
            return values
        mean, std = self.value_moments()
        return values * std + mean

    @torch.no_grad()
    def update_value_statistics(self, returns: torch.Tensor) -> None:
        """PopArt (van Hasselt et al. 2016): fold a batch of returns into the running mean
        and variance ("ART"), then rescale the value head's last layer so that its
        predictions in the rewards' units stay exactly what they were ("POP")."""
        if not self.value_normalization:
            raise RuntimeError("update_value_statistics needs value_normalization=True")
        old_mean, old_std = self.value_moments()
        count, mean, variance = self.value_stats.tolist()
        batch = returns.detach().double().flatten()
        n = batch.numel()
        if n == 0:
            return
        total = count + n
        delta = float(batch.mean()) - mean
        m2 = variance * count + float(batch.var(unbiased=False)) * n
        m2 += delta * delta * count * n / total
        self.value_stats.copy_(torch.tensor([total, mean + delta * n / total, m2 / total]))
        new_mean, new_std = self.value_moments()
        head = self.value_head
        assert isinstance(head, nn.Linear) and head.bias is not None
        head.weight.mul_(old_std / new_std)
        head.bias.mul_(old_std).add_(old_mean - new_mean).div_(new_std)

    def get_action_bundle(
        self,
        observations: torch.Tensor,
        action_mask: torch.Tensor | None = None,
        *,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> ActionBundle:
        """Actions (sampled, or the most likely with `deterministic`), their
        log-probabilities, the values and the policy entropies for a batch.

        `action_mask` (batch, actions) of bools narrows the allowed actions per row;
        `generator` makes sampling independent of torch's global RNG.
        """
        logits, values = self.policy_and_value(observations, action_mask)
        values = self.denormalize_values(values)
        log_probs_all = torch.log_softmax(logits, dim=-1)
        if deterministic:
            actions = logits.argmax(dim=-1)
        else:
            actions = _sample(log_probs_all.exp(), generator)
        log_probs = log_probs_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return ActionBundle(actions, log_probs, values, _entropy(log_probs_all))

    def evaluate_actions(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        action_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probabilities of `actions`, policy entropies and values (for the update; the
        values in the value head's units, normalised with value normalisation)."""
        evaluation = self.evaluate_policy(observations, actions, action_mask)
        return evaluation.log_probs, evaluation.entropy, evaluation.values

    def evaluate_policy(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        action_mask: torch.Tensor | None = None,
    ) -> PolicyEvaluation:
        """`evaluate_actions`, with the log-probabilities of every action as well."""
        logits, values = self.policy_and_value(observations, action_mask)
        log_probs_all = torch.log_softmax(logits, dim=-1)
        log_probs = log_probs_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        return PolicyEvaluation(log_probs, _entropy(log_probs_all), values, log_probs_all)

    @torch.no_grad()
    def greedy_actions(self, observations: torch.Tensor) -> torch.Tensor:
        """The most likely allowed action of each row."""
        return self.forward(observations).argmax(dim=-1)
