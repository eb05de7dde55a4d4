"""Per-env actor state and the reset/step bookkeeping around it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ..envs.lives import lives_lost
from .episode_metrics import EpisodeTotals


class ResultLike(Protocol):
    """What the actor reads from one OakEmuMultiEnv result."""

    env_id: int
    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class ResettableEnv(Protocol):
    """The part of OakEmuMultiEnv that EnvLifecycle drives."""

    def submit_reset(
        self, env_id: int, state: bytes | None = None, seed: int | None = None
    ) -> None: ...


@dataclass
class EnvironmentState:
    """What an actor knows about one of its envs.

    `observation` is the actor's own copy of the env's latest observation (the
    multi-env's buffer is only valid until the next submit).
    """

    env_id: int
    rng: np.random.Generator
    observation: npt.NDArray[Any] | None = None
    awaiting_reset: bool = True
    episode_start: bool = True
    episode_return: float = 0.0
    shaped_return: float = 0.0
    episode_length: int = 0
    last_action: int | None = None
    last_action_greedy: bool = False
    last_lives: int | None = None
    lives_lost: int = 0
    """Lives the episode has lost so far (an extra life does not cancel one lost)."""
    last_score: float = 0.0
    start_point: str = "initial"
    """Where the episode began: initial, restart (a restart-pool state) or backplay."""
    episode_seed: int | None = None
    reward_terms: dict[str, float] = field(default_factory=dict)
    """The episode's game reward so far by source (from each step's `info["reward_terms"]`)."""
    random_control: bool = False
    """True while a trajectory replay hands this env to random actions."""
    extra: dict[str, Any] = field(default_factory=dict)

    def begin_episode(self, observation: npt.NDArray[Any], info: dict[str, Any]) -> None:
        """Start a new episode with its first observation (copied)."""
        self.observation = np.array(observation, copy=True)
        self.awaiting_reset = False
        self.episode_start = True
        self.episode_return = 0.0
        self.shaped_return = 0.0
        self.reward_terms = {}
        self.episode_length = 0
        self.last_action = None
        self.last_action_greedy = False
        self.last_lives = _lives(info)
        self.lives_lost = 0
        self.last_score = float(info.get("score") or 0.0)
        seed = info.get("seed", info.get("episode_seed"))
        self.episode_seed = int(seed) if seed is not None else None


def _lives(info: dict[str, Any]) -> int | None:
    lives = info.get("lives")
    return int(lives) if lives is not None else None


@dataclass
class ActorRuntimeState:
    """Everything an actor checkpoints: counters, episode statistics, trajectories, RNGs.

    JSON-serialisable through `to_dict` / `from_dict`, so a checkpoint never needs pickle.
    """

    steps: int
    totals: EpisodeTotals
    episode_metrics: dict[str, Any] = field(default_factory=dict)
    trajectory: dict[str, Any] = field(default_factory=dict)
    rng_states: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "totals": self.totals.to_dict(),
            "episode_metrics": self.episode_metrics,
            "trajectory": self.trajectory,
            "rng_states": self.rng_states,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ActorRuntimeState:
        return cls(
            steps=int(data["steps"]),
            totals=EpisodeTotals.from_dict(data.get("totals", {})),
            episode_metrics=dict(data.get("episode_metrics", {})),
            trajectory=dict(data.get("trajectory", {})),
            rng_states=dict(data.get("rng_states", {})),
            extra=dict(data.get("extra", {})),
        )


class EnvLifecycle:
    """Creates the per-env states and drives resets.

    Each env gets its own RNG stream (from `seed` and its id), so what an env's
    actions are does not depend on the order in which envs finish their steps.
    """

    def __init__(self, num_envs: int, seed: int, stream: str = "actor") -> None:
        self.num_envs = num_envs
        self._seed = seed
        self._stream = stream
        self.states = [EnvironmentState(env_id=i, rng=self._make_rng(i)) for i in range(num_envs)]

    def _make_rng(self, env_id: int) -> np.random.Generator:
        key = [self._seed, env_id, *self._stream.encode()]
        return np.random.default_rng(np.random.SeedSequence(key))

    def __getitem__(self, env_id: int) -> EnvironmentState:
        return self.states[env_id]

    def __len__(self) -> int:
        return self.num_envs

    def request_reset(
        self,
        env: ResettableEnv,
        state: EnvironmentState,
        machine_state: bytes | None = None,
        seed: int | None = None,
    ) -> None:
        """Submit a reset for one env, from `machine_state` when given, with env seed `seed`
        (None: the env's own next seed)."""
        state.awaiting_reset = True
        state.observation = None
        state.start_point = "initial" if machine_state is None else "restart"
        env.submit_reset(state.env_id, machine_state, seed)

    def on_step(
        self,
        state: EnvironmentState,
        result: ResultLike,
        shaped_reward: float,
        added_terms: dict[str, float] | None = None,
    ) -> None:
        """Account one step of `state`'s episode (`added_terms`: rewards the shapers added,
        by term, summed beside the game's own)."""
        state.episode_return += float(result.reward)
        state.shaped_return += float(shaped_reward)
        state.episode_length += 1
        state.episode_start = False
        sums = state.reward_terms
        for terms in (result.info.get("reward_terms"), added_terms):
            for name, value in (terms or {}).items():
                sums[name] = sums.get(name, 0.0) + value
        lives = _lives(result.info)
        state.lives_lost += lives_lost(state.last_lives, lives)
        state.last_lives = lives
        state.last_score = float(result.info.get("score") or 0.0)

    def rng_states(self) -> list[dict[str, Any]]:
        """Each env RNG's state (JSON-serialisable)."""
        return [dict(s.rng.bit_generator.state) for s in self.states]

    def set_rng_states(self, states: list[dict[str, Any]]) -> None:
        """Restore the env RNGs (extra entries are ignored, missing ones kept)."""
        for state, rng_state in zip(self.states, states, strict=False):
            state.rng.bit_generator.state = rng_state
