"""Gymnasium registration: `oakemu/<game>` for each bundled game and `oakemu/game` for any YAML."""

from __future__ import annotations

import gymnasium as gym

from ..games.loader import bundled_games

ENTRY_POINT = "oakemu_rl.envs.oakemu_env:OakEmuEnv"


def register_envs() -> list[str]:
    """Register the bundled games (idempotent). Returns the ids."""
    ids = []
    for key, path in bundled_games().items():
        env_id = f"oakemu/{key}"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=ENTRY_POINT, kwargs={"game": str(path)})
        ids.append(env_id)
    if "oakemu/game" not in gym.registry:
        # gym.make("oakemu/game", game="path/to/game.yaml")
        gym.register("oakemu/game", entry_point=ENTRY_POINT)
    return ids
