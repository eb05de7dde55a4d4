"""The run directory shared by every algorithm: its file names, naming and atomic writes.

A run directory holds the resolved `config.yaml`, TensorBoard events (`tb/`),
checkpoints (`checkpoints/`) and, at the end, `summary.json`.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

CONFIG_NAME = "config.yaml"
SUMMARY_NAME = "summary.json"


class RunError(RuntimeError):
    """A run cannot start or be resumed (the message says why)."""


def game_key(game: str) -> str:
    """A short name for a game: 'catch', 'CartPole-v1', 'my_game'."""
    if game.startswith("gym:"):
        return game[4:]
    return Path(game).stem


def new_run_dir(game: str, algo: str, run_name: str | None, root: str | Path = "runs") -> Path:
    """runs/<run_name> or runs/<game>-<algo>-<date>-<time>, with -2, -3... if taken."""
    name = run_name or f"{game_key(game)}-{algo}-{time.strftime('%Y%m%d-%H%M%S')}"
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
    path = Path(root) / name
    n = 1
    while path.exists():
        n += 1
        path = Path(root) / f"{name}-{n}"
    return path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a synced temporary file: never a torn file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def jsonable(value: Any) -> Any:
    """`value` with non-finite floats as None (JSON has no NaN or infinity)."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
