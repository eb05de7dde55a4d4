"""Presets: tuned settings per algorithm and game, shipped with the package.

`oakemu-rl train --algo A --game G` starts from the preset of A for G when there is one
(``presets/<algo>/<game>.yaml``, where <game> is a bundled game's name or a Gymnasium
id such as ``CartPole-v1``); a `--config` file overrides fields of it, and the command
line overrides both. A game with no preset (a user's own game) gets the defaults.
`oakemu-rl config show` says which preset applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PRESET_DIR = Path(__file__).parent
GYM_PREFIX = "gym:"


@dataclass(frozen=True)
class Preset:
    """The preset of one algorithm for one game."""

    algo: str
    game: str
    path: Path

    @property
    def name(self) -> str:
        return f"{self.algo}/{self.path.stem}"

    def settings(self) -> dict[str, Any]:
        """The preset's settings (a partial configuration)."""
        data = yaml.safe_load(self.path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{self.path}: a preset must be a mapping of settings")
        return data


def preset_key(game: str) -> str | None:
    """The file name stem of `game`'s presets: a bundled game's name, or a Gymnasium id
    (``gym:CartPole-v1`` -> ``CartPole-v1``); None for a game YAML path."""
    if game.startswith(GYM_PREFIX):
        return game[len(GYM_PREFIX) :]
    if "/" in game or game.endswith((".yaml", ".yml")):
        return None
    return game


def find_preset(algo: str, game: str) -> Preset | None:
    """The preset of `algo` for `game`, None when there is none."""
    key = preset_key(game)
    if key is None:
        return None
    path = PRESET_DIR / algo / f"{key}.yaml"
    return Preset(algo, game, path) if path.is_file() else None


def available_presets() -> list[Preset]:
    """Every shipped preset."""
    return [
        Preset(path.parent.name, path.stem, path) for path in sorted(PRESET_DIR.glob("*/*.yaml"))
    ]


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`base` with `over` laid on top, section by section (nested mappings merge; any
    other value, lists included, replaces)."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged
