"""OakEmuEnv: one ZX Spectrum game as a Gymnasium environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from ..emulator.screen import to_rgb
from ..games.loader import GameDefinition, load_game
from ..games.session import GameSession
from .observation import ObservationConfig, ObservationPipeline
from .observation_choice import choose_observation

Observation = npt.NDArray[np.uint8]


class OakEmuEnv(gym.Env[Observation, np.int64]):
    """One game, one emulated Spectrum.

    `reset(seed=...)` runs the game's start procedure with `start.randomize`
    drawing from a seed taken from that seed's stream (`info["episode_seed"]`);
    `options={"episode_seed": S}` runs it with exactly S, which rebuilds a recorded
    episode's start; `reset(state=...)` (or `options={"state": ...}`)
    starts from a machine state saved with `save_state`. `step(action)` holds the
    action's keys for `frame_skip` frames; info carries `score`, `lives`, the
    step's `events`, the `outcome` (`win`, `loss`, `truncated` or None) and
    `reward_terms`: the step's reward by source (`GameStep.reward_terms`; empty after
    a reset).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}  # noqa: RUF012 (gymnasium API)

    def __init__(
        self,
        game: str | Path | GameDefinition,
        observation_config: ObservationConfig | dict[str, Any] | None = None,
        seed: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.game = game if isinstance(game, GameDefinition) else load_game(game)
        if observation_config is None:
            observation_config = ObservationConfig()
        elif isinstance(observation_config, dict):
            observation_config = ObservationConfig.model_validate(observation_config)
        self.observation_config = observation_config
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode {render_mode!r} is not supported; expected 'rgb_array'")
        self.render_mode = render_mode
        self.session = GameSession(self.game)
        # `auto` becomes what the game's screen suggests (`observation_choice.describe()`).
        self.observation_choice = choose_observation(observation_config, self.game)
        self.pipeline = ObservationPipeline(self.observation_choice.config, self.game)
        self.observation_space = self.pipeline.space
        self.num_actions = self.game.num_actions
        self.action_space = spaces.Discrete(self.num_actions)
        self._initial_seed = seed
        self._episode_return = 0.0
        self._needs_reset = True

    @property
    def machine(self) -> Any:
        return self.session.machine

    def reset(
        self,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        state: bytes | None = None,
    ) -> tuple[Observation, dict[str, Any]]:
        if seed is None and self._initial_seed is not None:
            seed, self._initial_seed = self._initial_seed, None
        super().reset(seed=seed)
        if state is None and options:
            state = options.get("state")
        episode_seed: int | None = None
        if state is not None:
            self.session.reset_to_state(state)
        elif options and options.get("episode_seed") is not None:
            episode_seed = int(options["episode_seed"])
            self.session.reset(episode_seed)
        else:
            episode_seed = int(self.np_random.integers(0, 2**31 - 1))
            self.session.reset(episode_seed)
        self._episode_return = 0.0
        self._needs_reset = False
        obs = self.pipeline.reset(self.session.machine)
        # The seed `start.randomize` drew from: replaying the episode's actions after
        # `session.reset(episode_seed)` rebuilds it (None when started from a state).
        return obs, {**self._info((), None, {}), "episode_seed": episode_seed}

    def step(self, action: np.int64 | int) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        if self._needs_reset:
            raise RuntimeError("step() called before reset() or after the episode ended")
        index = int(action)
        if not 0 <= index < self.num_actions:
            raise ValueError(f"action {action!r} is outside 0..{self.num_actions - 1}")
        result = self.session.step(index)
        self._episode_return += result.reward
        obs = self.pipeline.push(self.session.machine)
        terminated = result.outcome in ("win", "loss")
        truncated = result.outcome == "truncated"
        self._needs_reset = terminated or truncated
        return (
            obs,
            float(result.reward),
            terminated,
            truncated,
            self._info(result.events, result.outcome, result.reward_terms),
        )

    def _info(
        self, events: tuple[str, ...], outcome: str | None, reward_terms: dict[str, float]
    ) -> dict[str, Any]:
        values = self.session.values
        return {
            "score": values.get("score", 0),
            "lives": values.get("lives"),
            "events": events,
            "outcome": outcome,
            "reward_terms": reward_terms,
            "values": values,
            "episode_return": self._episode_return,
            "episode_steps": self.session.steps,
        }

    def save_state(self) -> bytes:
        """The full machine state, for restarts (`reset(state=...)`)."""
        return self.session.save_state()

    def render(self) -> npt.NDArray[np.uint8] | None:
        if self.render_mode != "rgb_array":
            return None
        return to_rgb(self.session.machine.screen())
