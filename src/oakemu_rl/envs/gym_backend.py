"""Any Gymnasium environment (CartPole, ALE, ...) behind the OakEmuEnv interface."""

from __future__ import annotations

import difflib
from typing import Any

import gymnasium as gym

GYM_PREFIX = "gym:"


class GymEnvError(ValueError):
    """A Gymnasium env id that names no env, or an env that cannot be made."""


class GymBackendEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Wraps a Gymnasium env so it can stand wherever an OakEmu env can.

    info gains `score` (the episode return so far), `lives` (from the wrapped
    env's info when it has them), `events` (empty) and `outcome`: a terminated
    episode counts as `terminated_outcome` ("loss" by default: CartPole's pole
    falls, an ALE game ends), a truncated one as "truncated".
    """

    def __init__(
        self,
        env_id: str,
        seed: int | None = None,
        terminated_outcome: str = "loss",
        **make_kwargs: Any,
    ) -> None:
        if env_id.startswith(GYM_PREFIX):
            env_id = env_id[len(GYM_PREFIX) :]
        check_gym_id(GYM_PREFIX + env_id)
        try:
            env = gym.make(env_id, **make_kwargs)
        except gym.error.Error as exc:
            raise GymEnvError(f"gym:{env_id}: cannot make this Gymnasium env: {exc}") from None
        super().__init__(env)
        self.env_id = env_id
        self.terminated_outcome = terminated_outcome
        self._initial_seed = seed
        self._return = 0.0
        self._steps = 0

    def reset(
        self,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        state: bytes | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        if state is not None or (options and "state" in options):
            raise NotImplementedError(f"gym:{self.env_id} cannot start from a saved machine state")
        if seed is None and self._initial_seed is not None:
            seed, self._initial_seed = self._initial_seed, None
        obs, info = self.env.reset(seed=seed, options=options)
        self._return, self._steps = 0.0, 0
        return obs, self._info(info, None)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._steps += 1
        outcome = self.terminated_outcome if terminated else "truncated" if truncated else None
        return obs, float(reward), bool(terminated), bool(truncated), self._info(info, outcome)

    def _info(self, info: dict[str, Any], outcome: str | None) -> dict[str, Any]:
        info = dict(info)
        info.setdefault("lives", info.get("lives"))
        info.update(
            score=self._return,
            events=(),
            outcome=outcome,
            episode_return=self._return,
            episode_steps=self._steps,
        )
        return info

    def save_state(self) -> bytes:
        raise NotImplementedError(f"gym:{self.env_id} has no machine state to save")


def is_gym_id(game: object) -> bool:
    return isinstance(game, str) and game.startswith(GYM_PREFIX)


def check_gym_id(game: str) -> None:
    """GymEnvError unless `game` (``gym:<id>``) names a registered Gymnasium env. An id
    with a module (``gym:package.module:Env-v0``) registers its env on import, so it is
    checked when it is made (and only with code allowed: see `code_references`)."""
    env_id = game[len(GYM_PREFIX) :] if game.startswith(GYM_PREFIX) else game
    if ":" in env_id or env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise GymEnvError(f"{game}: no Gymnasium env has this id{hint}")
