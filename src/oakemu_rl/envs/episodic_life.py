"""A lost life as the end of an episode for the learner, the game going on (episodic life)."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from .lives import lives_lost


class EpisodicLife(gym.Wrapper[Any, Any, Any, Any]):
    """Ends the episode (``terminated``) when ``info["lives"]`` falls, without ending the
    game: the next `reset` continues from where the life was lost. A new game starts only
    after the game's own end (or a truncation), or when `reset` is given a seed or options.
    DeepMind's "episodic life" for Atari, for any env that reports ``info["lives"]``; SB3's
    ``EpisodicLifeEnv`` reads Atari's ALE instead.

    ``info["game_over"]`` says whether an episode's end was the game's own. Evaluate on
    the unwrapped env: its episodes are whole games.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self._lives: Any = None
        self._game_over = True
        self._last: tuple[Any, dict[str, Any]] | None = None

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        lost = lives_lost(self._lives, info.get("lives"))
        self._lives = info.get("lives")
        self._game_over = terminated or truncated
        self._last = (observation, info)
        info = {**info, "game_over": self._game_over}
        return observation, reward, terminated or lost > 0, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if self._game_over or self._last is None or seed is not None or options:
            observation, info = self.env.reset(seed=seed, options=options)
            self._lives = info.get("lives")
            self._game_over = False
        else:
            observation, info = self._last  # a life was lost: play on from there
        return observation, {**info, "game_over": False}
