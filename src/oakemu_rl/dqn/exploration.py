"""Exploration strategies: linear or exponential epsilon-greedy, and NoisyNet exploration."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from .config import ExplorationSettings


class ExplorationStrategy(ABC):
    """Decides when an actor explores and reports the exploration value."""

    uses_noise: bool = False
    """True when exploration comes from NoisyNet layers (noise resets instead of epsilon)."""

    @abstractmethod
    def value(self, step: int) -> float | None:
        """The exploration value (epsilon) at `step`, or None when there is none."""

    def should_explore(self, step: int, rng: np.random.Generator) -> bool:
        """Whether to take a random action now."""
        epsilon = self.value(step)
        return epsilon is not None and epsilon > 0.0 and bool(rng.random() < epsilon)

    def should_reset_noise(self, step: int, num_environments: int) -> bool:
        """Whether the actor model's noise should be redrawn before an inference flush."""
        return False

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the strategy (JSON-serialisable; empty for schedules
        that depend on the step alone)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - nothing to restore
        """Restore what `state_dict` returned (missing keys keep their values)."""

    @staticmethod
    def from_settings(settings: ExplorationSettings) -> ExplorationStrategy:
        """Build the strategy a configuration names."""
        if settings.type == "linear":
            return LinearEpsilonGreedy(
                settings.epsilon_start, settings.epsilon_end, settings.decay_steps
            )
        if settings.type == "exponential":
            return ExponentialEpsilonGreedy(
                settings.epsilon_start, settings.epsilon_end, settings.decay_steps
            )
        return NoisyNetExploration()


class LinearEpsilonGreedy(ExplorationStrategy):
    """Epsilon falls linearly from `start` to `end` over `decay_steps`, then stays."""

    def __init__(self, start: float, end: float, decay_steps: int) -> None:
        self.start, self.end, self.decay_steps = start, end, max(1, decay_steps)

    def value(self, step: int) -> float:
        fraction = min(1.0, max(0, step) / self.decay_steps)
        return self.start + (self.end - self.start) * fraction


class ExponentialEpsilonGreedy(ExplorationStrategy):
    """Epsilon decays exponentially from `start` towards `end`.

    epsilon(t) = end + (start - end) * 0.01 ** (t / decay_steps): after `decay_steps`
    it is within 1% of the start-end range of `end`.
    """

    def __init__(self, start: float, end: float, decay_steps: int) -> None:
        self.start, self.end, self.decay_steps = start, end, max(1, decay_steps)
        self._rate = math.log(0.01) / self.decay_steps

    def value(self, step: int) -> float:
        return self.end + (self.start - self.end) * math.exp(self._rate * max(0, step))


class NoisyNetExploration(ExplorationStrategy):
    """Exploration by NoisyNet layers: no epsilon; the actor's noise is redrawn about
    once per round of its envs (every `num_environments` steps) and after each weight sync.
    """

    uses_noise = True

    def __init__(self) -> None:
        self._last_reset_step: int | None = None

    def value(self, step: int) -> None:
        return None

    def should_explore(self, step: int, rng: np.random.Generator) -> bool:
        return False

    def should_reset_noise(self, step: int, num_environments: int) -> bool:
        if self._last_reset_step is None or step - self._last_reset_step >= num_environments:
            self._last_reset_step = step
            return True
        return False

    def state_dict(self) -> dict[str, Any]:
        return {"noise_reset_step": self._last_reset_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "noise_reset_step" in state:
            step = state["noise_reset_step"]
            self._last_reset_step = None if step is None else int(step)
