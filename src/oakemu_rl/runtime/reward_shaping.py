"""RewardShapingPipeline: composable reward shapers, applied by either algorithm's actor to
each step's reward before it is learned from (DQN: before replay; PPO: before the rollout
buffer). Built from a configuration's `reward_shaping` list.

A shaper may keep statistics (`NormalizeReward` keeps the scale of the discounted
return, `NoveltyBonus` its visit counts); the pipeline's `state_dict` holds them for
checkpoints and `scalars` reports them to TensorBoard. A shaper that adds a reward of its
own (`NoveltyBonus`) names it as a term: the pipeline's `last_terms` holds each step's,
and the actor sums them per episode into `episode/reward/bonus:<term>`."""

from __future__ import annotations

import importlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..envs.lives import lives_lost
from ..games.cells import VariableCells, variable_cells
from ..games.loader import load_game
from .config_base import (
    CallableShaper,
    ClipShaper,
    LifeLossShaper,
    NormalizeShaper,
    NoveltyShaper,
    ScaleShaper,
    ShaperConfig,
    SignShaper,
)
from .env_lifecycle import EnvironmentState

__all__ = [
    "BONUS_PREFIX",
    "CallableReward",
    "ClipReward",
    "LifeLossPenalty",
    "NormalizeReward",
    "NoveltyBonus",
    "RewardShaper",
    "RewardShapingPipeline",
    "RewardTransform",
    "ScaleReward",
    "SignReward",
    "resolve_callable",
]


BONUS_PREFIX = "bonus:"
"""How the reward a shaper adds is named among an episode's reward terms
(`episode/reward/bonus:novelty`), apart from the game's own terms."""


class RewardShaper(ABC):
    """Turns one step's reward into the reward the learner sees."""

    term: str | None = None
    """The name of the reward this shaper adds (its `episode/reward/<term>` scalar); None
    for one that only transforms the reward."""
    last_added: float = 0.0
    """What the shaper added on its last call (read when `term` is set)."""
    needs_observation: bool = False
    """Whether the pipeline passes the step's next observation (`next_observation`)."""

    @abstractmethod
    def __call__(
        self,
        reward: float,
        info: dict[str, Any],
        env_state: EnvironmentState,
        next_observation: npt.NDArray[Any] | None = None,
    ) -> float:
        """The shaped reward. `env_state` still describes the env before this step;
        `next_observation` is the observation the step led to."""

    def state_dict(self) -> dict[str, Any]:
        """What the shaper has learned so far (JSON-serialisable; empty when stateless)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        del state  # a stateless shaper has nothing to restore

    def scalars(self) -> dict[str, float]:
        """TensorBoard scalars that show the shaper's state."""
        return {}


class RewardTransform(RewardShaper):
    """A shaper that looks at the reward alone: subclasses define `transform`."""

    def __call__(
        self,
        reward: float,
        info: dict[str, Any],
        env_state: EnvironmentState,
        next_observation: npt.NDArray[Any] | None = None,
    ) -> float:
        return self.transform(reward)

    @abstractmethod
    def transform(self, reward: float) -> float:
        """The shaped reward."""


class ClipReward(RewardTransform):
    """Clip into [low, high]."""

    def __init__(self, low: float = -1.0, high: float = 1.0) -> None:
        if low > high:
            raise ValueError(f"clip: min {low} is above max {high}")
        self.low, self.high = low, high

    def transform(self, reward: float) -> float:
        return min(self.high, max(self.low, reward))


class ScaleReward(RewardTransform):
    """Multiply by `factor`."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def transform(self, reward: float) -> float:
        return reward * self.factor


class SignReward(RewardTransform):
    """-1, 0 or +1."""

    def transform(self, reward: float) -> float:
        return float(np.sign(reward))


class LifeLossPenalty(RewardShaper):
    """Subtract `penalty` on a step where the `lives` value falls."""

    def __init__(self, penalty: float) -> None:
        self.penalty = penalty

    def __call__(
        self,
        reward: float,
        info: dict[str, Any],
        env_state: EnvironmentState,
        next_observation: npt.NDArray[Any] | None = None,
    ) -> float:
        if lives_lost(env_state.last_lives, info.get("lives")):
            return reward - self.penalty
        return reward


class NormalizeReward(RewardShaper):
    """Divide the reward by a running estimate of the discounted return's standard deviation
    (as Stable-Baselines3's VecNormalize and CleanRL's NormalizeReward do).

    Each env keeps a discounted sum of its episode's rewards, `G <- gamma * G + r`, which
    starts again at each episode's first step; every step adds that env's G to one running
    variance over all envs (Welford's algorithm). The reward is divided by
    `sqrt(var + epsilon)` and clipped into [-clip, clip]. No mean is subtracted, so every
    reward keeps its sign, and returns keep their sign and order within a scale.
    Until two returns are seen the scale is 1.
    """

    SCALAR = "reward/normalisation_scale"

    def __init__(self, gamma: float, clip: float | None = 10.0, epsilon: float = 1e-8) -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"normalize: gamma {gamma} is not in [0, 1]")
        if clip is not None and clip <= 0:
            raise ValueError(f"normalize: clip {clip} is not positive")
        self.gamma, self.clip, self.epsilon = gamma, clip, epsilon
        self._returns: dict[int, float] = {}
        self.count = 0
        self.mean = 0.0
        self._m2 = 0.0

    @property
    def variance(self) -> float:
        """The running variance of the discounted returns (0 before two are seen)."""
        return self._m2 / self.count if self.count > 1 else 0.0

    @property
    def scale(self) -> float:
        """What rewards are divided by: sqrt(variance + epsilon), 1 before two returns."""
        return math.sqrt(self.variance + self.epsilon) if self.count > 1 else 1.0

    def __call__(
        self,
        reward: float,
        info: dict[str, Any],
        env_state: EnvironmentState,
        next_observation: npt.NDArray[Any] | None = None,
    ) -> float:
        env_id = env_state.env_id
        before = 0.0 if env_state.episode_start else self._returns.get(env_id, 0.0)
        discounted = self.gamma * before + reward
        self._returns[env_id] = discounted
        self.count += 1
        delta = discounted - self.mean
        self.mean += delta / self.count
        self._m2 += delta * (discounted - self.mean)
        normalised = reward / self.scale
        if self.clip is not None:
            normalised = min(self.clip, max(-self.clip, normalised))
        return normalised

    def state_dict(self) -> dict[str, Any]:
        # The per-env sums are not kept: a resumed run starts its episodes afresh.
        return {"count": self.count, "mean": self.mean, "m2": self._m2}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = int(state["count"])
        self.mean = float(state["mean"])
        self._m2 = float(state["m2"])
        self._returns.clear()

    def scalars(self) -> dict[str, float]:
        return {self.SCALAR: self.scale}


class NoveltyBonus(RewardShaper):
    """A count-based exploration bonus (#Exploration, Tang et al. 2017): each step's
    next state falls in a cell, and the step earns `coef / sqrt(n)`, n counting this
    visit. A cell is the sign pattern of `bits` fixed random projections of the next
    observation (a SimHash: similar observations mostly share a cell), or, given
    `variables`, the game's data variables cut into bins (Go-Explore's cells: the player's
    position, say). The counts are over all envs and kept in checkpoints."""

    term = "novelty"
    needs_observation = True
    SCALARS = ("reward/novelty_cells", "reward/novelty_bonus")

    def __init__(
        self, coef: float, bits: int = 16, seed: int = 0, variables: VariableCells | None = None
    ) -> None:
        if coef <= 0:
            raise ValueError(f"novelty: coef {coef} is not positive")
        if not 1 <= bits <= 24:
            raise ValueError(f"novelty: bits {bits} is not in 1-24")
        self.coef, self.bits, self.seed = coef, bits, seed
        self.variables = variables
        self.counts: dict[int, int] = {}
        self._projection: npt.NDArray[np.float32] | None = None
        self._weights = (1 << np.arange(bits, dtype=np.int64)).astype(np.int64)
        self._recent: list[float] = []

    def cell(self, observation: npt.NDArray[Any], info: Mapping[str, Any] | None = None) -> int:
        """The cell of a step: from the game's variables in `info["values"]` when the bonus
        has `variables`, else a `bits`-bit SimHash of `observation`."""
        if self.variables is not None:
            values = (info or {}).get("values")
            if values is None:
                raise ValueError("novelty: cells of game variables need each step's info['values']")
            return self.variables.cell(values)
        flat = np.asarray(observation, dtype=np.float32).reshape(-1)
        if self._projection is None or self._projection.shape[1] != flat.size:
            rng = np.random.default_rng(self.seed)
            self._projection = rng.standard_normal((self.bits, flat.size), dtype=np.float32)
        signs = (self._projection @ (flat - flat.mean())) > 0
        return int(signs.astype(np.int64) @ self._weights)

    def __call__(
        self,
        reward: float,
        info: dict[str, Any],
        env_state: EnvironmentState,
        next_observation: npt.NDArray[Any] | None = None,
    ) -> float:
        if next_observation is None:
            raise ValueError("novelty: the shaper needs each step's next observation")
        cell = self.cell(next_observation, info)
        visits = self.counts.get(cell, 0) + 1
        self.counts[cell] = visits
        self.last_added = self.coef / math.sqrt(visits)
        self._recent.append(self.last_added)
        return reward + self.last_added

    def visits(self, cell: int) -> int:
        """How often `cell` has been visited."""
        return self.counts.get(cell, 0)

    def state_dict(self) -> dict[str, Any]:
        return {"counts": [[cell, n] for cell, n in self.counts.items()]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counts = {int(cell): int(n) for cell, n in state["counts"]}

    def scalars(self) -> dict[str, float]:
        recent, self._recent = self._recent, []
        bonus = float(np.mean(recent)) if recent else float("nan")
        return {self.SCALARS[0]: float(len(self.counts)), self.SCALARS[1]: bonus}


def _cells(config: NoveltyShaper, game: str | None) -> VariableCells | None:
    """The variable cells a novelty shaper's configuration asks for (None: SimHash)."""
    if config.cell != "variables":
        return None
    if game is None or game.startswith("gym:"):
        raise ValueError(
            f"reward_shaping novelty: cell 'variables' reads an OakEmu game's data "
            f"variables; the game is {game!r}"
        )
    return variable_cells(load_game(game), config.variables, config.levels, seed=config.seed)


class CallableReward(RewardShaper):
    """A user function `f(reward, info, **kwargs) -> float`, named 'module:function'."""

    def __init__(self, target: str, kwargs: dict[str, Any] | None = None) -> None:
        self.target = target
        self.kwargs = dict(kwargs or {})
        self.function = resolve_callable(target)

    def __call__(
        self,
        reward: float,
        info: dict[str, Any],
        env_state: EnvironmentState,
        next_observation: npt.NDArray[Any] | None = None,
    ) -> float:
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
    """Applies shapers in order: `pipeline(reward, info, env_state, next_observation)`."""

    def __init__(self, shapers: Iterable[RewardShaper] = ()) -> None:
        self.shapers = list(shapers)
        self.last_terms: dict[str, float] = {}
        """The rewards the shapers added on the last call, by term (empty when none adds
        one)."""

    def __call__(
        self,
        reward: float,
        info: dict[str, Any],
        env_state: EnvironmentState,
        next_observation: npt.NDArray[Any] | None = None,
    ) -> float:
        terms: dict[str, float] = {}
        for shaper in self.shapers:
            if shaper.needs_observation:
                reward = shaper(reward, info, env_state, next_observation)
            else:
                reward = shaper(reward, info, env_state)
            if shaper.term is not None:
                name = BONUS_PREFIX + shaper.term
                terms[name] = terms.get(name, 0.0) + shaper.last_added
        self.last_terms = terms
        return float(reward)

    def __len__(self) -> int:
        return len(self.shapers)

    @property
    def novelty(self) -> NoveltyBonus | None:
        """The pipeline's novelty bonus (None without one)."""
        return next((s for s in self.shapers if isinstance(s, NoveltyBonus)), None)

    def state_dict(self) -> dict[str, Any]:
        """Each shaper's state, by position and kind (JSON-serialisable)."""
        return {
            "shapers": [
                {"kind": type(shaper).__name__, "state": shaper.state_dict()}
                for shaper in self.shapers
            ]
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned; a shaper whose entry is missing or of another
        kind (a checkpoint of an older version) keeps its fresh state."""
        saved = state.get("shapers", [])
        for shaper, entry in zip(self.shapers, saved, strict=False):
            if entry.get("kind") == type(shaper).__name__ and entry.get("state"):
                shaper.load_state_dict(entry["state"])

    def scalars(self) -> dict[str, float]:
        """The shapers' TensorBoard scalars."""
        scalars: dict[str, float] = {}
        for shaper in self.shapers:
            scalars.update(shaper.scalars())
        return scalars

    @classmethod
    def from_config(
        cls, configs: Sequence[ShaperConfig], gamma: float | None = None, game: str | None = None
    ) -> RewardShapingPipeline:
        """Build the pipeline a configuration's `reward_shaping` list describes; `gamma` is
        the algorithm's discount factor (a `normalize` shaper without its own needs it),
        `game` the configuration's game (a `novelty` shaper with `cell: variables` needs
        it)."""
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
            elif isinstance(config, NormalizeShaper):
                discount = config.gamma if config.gamma is not None else gamma
                if discount is None:
                    raise ValueError(
                        "reward_shaping: a 'normalize' shaper without gamma needs the "
                        "algorithm's discount factor"
                    )
                shapers.append(NormalizeReward(discount, config.clip, config.epsilon))
            elif isinstance(config, NoveltyShaper):
                shapers.append(
                    NoveltyBonus(config.coef, config.bits, config.seed, _cells(config, game))
                )
            elif isinstance(config, CallableShaper):
                shapers.append(CallableReward(config.target, config.kwargs))
        return cls(shapers)
