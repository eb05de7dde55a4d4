"""Build an env from a command-line style game name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .gym_backend import GymBackendEnv, is_gym_id
from .oakemu_env import OakEmuEnv
from .observation import ObservationConfig


def make_env(
    game: str | Path,
    observation_config: ObservationConfig | dict[str, Any] | None = None,
    seed: int | None = None,
) -> OakEmuEnv | GymBackendEnv:
    """`game` is a bundled game name, a YAML path, or `gym:<env id>`."""
    if is_gym_id(game):
        return GymBackendEnv(str(game), seed=seed)
    return OakEmuEnv(game, observation_config, seed=seed)
