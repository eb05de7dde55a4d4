"""RewardShapingPipeline: composable reward shapers, applied by either algorithm's actor to
each step's reward before it is learned from (DQN: before replay; PPO: before the rollout
buffer). Built from a configuration's `reward_shaping` list."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .config_base import (
    CallableShaper,
    ClipShaper,
    LifeLossShaper,
    ScaleShaper,
    ShaperConfig,
    SignShaper,
)
from .env_lifecycle import EnvironmentState

__all__ = [
    "CallableReward",
    "ClipReward",
    "LifeLossPenalty",
    "RewardShaper",
    "RewardShapingPipeline",
    "ScaleReward",
    "SignReward",
    "resolve_callable",
]


class RewardShaper(ABC):
    """Turns one step's reward into the reward the learner sees."""

    @abstractmethod
    def __call__(self, reward: float, info: dict[str, Any], env_state: EnvironmentState) -> float:
        """The shaped reward. `env_state` still describes the env before this step."""


class ClipReward(RewardShaper):
    """Clip into [low, high]."""

    def __init__(self, low: float = -1.0, high: float = 1.0) -> None:
        if low > high:
            raise ValueError(f"clip: min {low} is above max {high}")
        self.low, self.high = low, high

    def __call__(self, reward: float, info: dict[str, Any], env_state: EnvironmentState) -> float:
        return min(self.high, max(self.low, reward))


class ScaleReward(RewardShaper):
    """Multiply by `factor`."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __call__(self, reward: float, info: dict[str, Any], env_state: EnvironmentState) -> float:
        return reward * self.factor


class SignReward(RewardShaper):
    """-1, 0 or +1."""

    def __call__(self, reward: float, info: dict[str, Any], env_state: EnvironmentState) -> float:
        return float(np.sign(reward))


class LifeLossPenalty(RewardShaper):
    """Subtract `penalty` on a step where the `lives` value falls."""

    def __init__(self, penalty: float) -> None:
        self.penalty = penalty

    def __call__(self, reward: float, info: dict[str, Any], env_state: EnvironmentState) -> float:
        lives, before = info.get("lives"), env_state.last_lives
        if lives is not None and before is not None and int(lives) < before:
            return reward - self.penalty
        return reward


class CallableReward(RewardShaper):
    """A user function `f(reward, info, **kwargs) -> float`, named 'module:function'."""

    def __init__(self, target: str, kwargs: dict[str, Any] | None = None) -> None:
        self.target = target
        self.kwargs = dict(kwargs or {})
        self.function = resolve_callable(target)

    def __call__(self, reward: float, info: dict[str, Any], env_state: EnvironmentState) -> float:
        return float(self.function(reward, info, **self.kwargs))


def resolve_callable(target: str) -> Callable[..., Any]:
    """Import 'package.module:function' (or 'package.module.function')."""
    module_name, sep, attribute = target.partition(":")
    if not sep:
        module_name, _, attribute = target.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"reward shaper target {target!r}: expected 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"reward shaper target {target!r}: cannot import {module_name}: {exc}"
        ) from None
    function = module
    for part in attribute.split("."):
        if not hasattr(function, part):
            raise ValueError(f"reward shaper target {target!r}: {module_name} has no {attribute}")
        function = getattr(function, part)
    if not callable(function):
        raise ValueError(f"reward shaper target {target!r} is not callable")
    return function


class RewardShapingPipeline:
    """Applies shapers in order: `pipeline(reward, info, env_state)`."""

    def __init__(self, shapers: Iterable[RewardShaper] = ()) -> None:
        self.shapers = list(shapers)

    def __call__(self, reward: float, info: dict[str, Any], env_state: EnvironmentState) -> float:
        for shaper in self.shapers:
            reward = shaper(reward, info, env_state)
        return float(reward)

    def __len__(self) -> int:
        return len(self.shapers)

    @classmethod
    def from_config(cls, configs: Sequence[ShaperConfig]) -> RewardShapingPipeline:
        """Build the pipeline a configuration's `reward_shaping` list describes."""
        shapers: list[RewardShaper] = []
        for config in configs:
            if isinstance(config, ClipShaper):
                shapers.append(ClipReward(config.min, config.max))
            elif isinstance(config, ScaleShaper):
                shapers.append(ScaleReward(config.factor))
            elif isinstance(config, SignShaper):
                shapers.append(SignReward())
            elif isinstance(config, LifeLossShaper):
                shapers.append(LifeLossPenalty(config.penalty))
            elif isinstance(config, CallableShaper):
                shapers.append(CallableReward(config.target, config.kwargs))
        return cls(shapers)
