"""Trajectory files: one recorded episode of a game, in a documented, versioned format.

A trajectory file is a JSON object (``*.trajectory.json``):

``format``
    ``"oakemu-rl-trajectory"``.
``version``
    ``1``.
``game``, ``game_file``, ``game_sha256``
    The game's name, the YAML file it was played with and the SHA-256 of that file's
    bytes; a trajectory is replayed only against the same YAML.
``start``
    ``{"seed": S}``: the episode began with the game's start procedure, ``start.randomize``
    drawing from seed S; or ``{"state": B, "step": K}``: it began from a saved machine state
    (B: base64 of the zlib-compressed state) that was step K of an earlier episode.
``actions``, ``rewards``
    One entry per agent step: the action's index in the YAML's ``actions`` and the reward.
``outcome``
    ``win``, ``loss``, ``truncated`` or null (the recording stopped first).
``episode_return``, ``score``, ``lives_lost``
    Totals at the end of the trajectory.
``source``
    Where it came from: ``demo`` (the search demonstrator), ``play`` (a person), ``run``
    (a training run's own episode).
``info``
    Free-form details of its source (the run step, the search settings, ...).

The emulator is deterministic, so the start and the actions rebuild every observation of
the episode (`trajectories.materialise`).
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..games.loader import GameDefinition, bundled_games

__all__ = [
    "FORMAT",
    "SUFFIX",
    "VERSION",
    "Trajectory",
    "TrajectoryFileError",
    "find_trajectory_files",
    "game_file_label",
    "load_trajectories",
]

FORMAT = "oakemu-rl-trajectory"
VERSION = 1
SUFFIX = ".trajectory.json"
OUTCOMES = ("win", "loss", "truncated", None)


class TrajectoryFileError(ValueError):
    """A trajectory file that cannot be read or does not fit the game it is used with."""


@dataclass
class Trajectory:
    """One recorded episode: where it started, its actions and rewards, how it ended."""

    game: str
    game_file: str
    game_sha256: str
    actions: npt.NDArray[np.int16]
    rewards: npt.NDArray[np.float32]
    start_seed: int | None = None
    start_state: bytes | None = None
    start_step: int = 0
    outcome: str | None = None
    episode_return: float = 0.0
    score: float = 0.0
    lives_lost: int = 0
    source: str = "run"
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.actions = np.asarray(self.actions, dtype=np.int16)
        self.rewards = np.asarray(self.rewards, dtype=np.float32)
        if self.actions.shape != self.rewards.shape or self.actions.ndim != 1:
            raise TrajectoryFileError(
                f"a trajectory needs one reward per action; got {self.actions.shape} actions "
                f"and {self.rewards.shape} rewards"
            )
        if (self.start_seed is None) == (self.start_state is None):
            raise TrajectoryFileError("a trajectory starts from either a seed or a machine state")
        if self.outcome not in OUTCOMES:
            raise TrajectoryFileError(
                f"outcome {self.outcome!r} is not one of win, loss, truncated or null"
            )

    @property
    def length(self) -> int:
        """Agent steps."""
        return int(self.actions.shape[0])

    @property
    def won(self) -> bool:
        return self.outcome == "win"

    @property
    def start_label(self) -> str:
        """Where it starts, for listings: ``seed S`` or ``state@K``."""
        return (
            f"seed {self.start_seed}" if self.start_seed is not None else f"state@{self.start_step}"
        )

    def returns_to_go(self) -> npt.NDArray[np.float64]:
        """The undiscounted return from each step to the end (length + 1 entries)."""
        tail = np.cumsum(self.rewards[::-1].astype(np.float64))[::-1]
        return np.concatenate([tail, [0.0]])

    # -- files --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        start: dict[str, Any]
        if self.start_state is not None:
            packed = base64.b64encode(zlib.compress(self.start_state, 6)).decode("ascii")
            start = {"state": packed, "step": self.start_step}
        else:
            start = {"seed": self.start_seed}
        return {
            "format": FORMAT,
            "version": VERSION,
            "game": self.game,
            "game_file": self.game_file,
            "game_sha256": self.game_sha256,
            "start": start,
            "actions": [int(a) for a in self.actions],
            "rewards": [float(r) for r in self.rewards],
            "outcome": self.outcome,
            "episode_return": float(self.episode_return),
            "score": float(self.score),
            "lives_lost": int(self.lives_lost),
            "source": self.source,
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, data: Any, origin: str = "<trajectory>") -> Trajectory:
        """Parse a trajectory file's object; errors name `origin` and the field."""
        if not isinstance(data, dict):
            raise TrajectoryFileError(
                f"{origin}: expected a JSON object, got {type(data).__name__}"
            )
        if data.get("format") != FORMAT:
            raise TrajectoryFileError(
                f"{origin}: format is {data.get('format')!r}; expected {FORMAT!r}"
            )
        version = data.get("version")
        if version != VERSION:
            raise TrajectoryFileError(
                f"{origin}: version {version!r} is not supported; this OakEmu-RL reads "
                f"version {VERSION}"
            )

        def need(name: str, kind: type | tuple[type, ...]) -> Any:
            if name not in data:
                raise TrajectoryFileError(f"{origin}: field {name!r} is missing")
            value = data[name]
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                raise TrajectoryFileError(
                    f"{origin}: field {name!r} has the wrong type ({type(value).__name__})"
                )
            return value

        start = need("start", dict)
        state: bytes | None = None
        seed: int | None = None
        if "state" in start:
            try:
                state = zlib.decompress(base64.b64decode(start["state"], validate=True))
            except (ValueError, zlib.error) as exc:
                raise TrajectoryFileError(
                    f"{origin}: start.state is not a packed machine state: {exc}"
                ) from None
        elif isinstance(start.get("seed"), int):
            seed = int(start["seed"])
        else:
            raise TrajectoryFileError(f"{origin}: start needs an integer 'seed' or a 'state'")
        actions = need("actions", list)
        rewards = need("rewards", list)
        if not all(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in actions):
            raise TrajectoryFileError(f"{origin}: actions must be non-negative integers")
        if not all(isinstance(r, int | float) and np.isfinite(r) for r in rewards):
            raise TrajectoryFileError(f"{origin}: rewards must be finite numbers")
        try:
            return cls(
                game=str(need("game", str)),
                game_file=str(need("game_file", str)),
                game_sha256=str(need("game_sha256", str)),
                actions=np.array(actions, dtype=np.int16),
                rewards=np.array(rewards, dtype=np.float32),
                start_seed=seed,
                start_state=state,
                start_step=int(start.get("step", 0)),
                outcome=data.get("outcome"),
                episode_return=float(need("episode_return", (int, float))),
                score=float(data.get("score", 0.0)),
                lives_lost=int(data.get("lives_lost", 0)),
                source=str(data.get("source", "run")),
                info=dict(data.get("info") or {}),
            )
        except TrajectoryFileError as exc:
            raise TrajectoryFileError(f"{origin}: {exc}") from None

    def save(self, path: str | Path) -> Path:
        """Write the file atomically (a temporary name, then a rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".tmp-{path.name}")
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Trajectory:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TrajectoryFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise TrajectoryFileError(f"{path}: not a text (JSON) file") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TrajectoryFileError(f"{path}: not valid JSON: {exc}") from None
        return cls.from_dict(data, str(path))

    def check_game(self, game_name: str, sha256: str, origin: str = "") -> None:
        """Raise TrajectoryFileError unless the trajectory was played with this game YAML."""
        where = f"{origin}: " if origin else ""
        if self.game_sha256 != sha256:
            raise TrajectoryFileError(
                f"{where}recorded with {self.game!r} ({self.game_file}, sha256 "
                f"{self.game_sha256[:12]}...), not with this game {game_name!r} (sha256 "
                f"{sha256[:12]}...); a trajectory replays only against the YAML it was "
                "recorded with"
            )


def game_file_label(game: GameDefinition) -> str:
    """How a trajectory names its game: the bundled key, or the YAML's absolute path."""
    bundled = bundled_games().get(game.key)
    if bundled is not None and bundled.resolve() == game.path.resolve():
        return game.key
    return str(game.path.resolve())


def find_trajectory_files(source: str | Path) -> list[Path]:
    """The trajectory files a path names: the file itself, or every ``*.trajectory.json``
    under a directory (sorted)."""
    source = Path(source)
    if source.is_dir():
        return sorted(p for p in source.rglob(f"*{SUFFIX}") if not p.name.startswith(".tmp-"))
    if source.is_file():
        return [source]
    raise TrajectoryFileError(f"{source}: no such file or directory")


def load_trajectories(sources: Iterable[str | Path]) -> list[tuple[Path, Trajectory]]:
    """Every trajectory under `sources` (files or directories), with its path."""
    found: list[tuple[Path, Trajectory]] = []
    for source in sources:
        for path in find_trajectory_files(source):
            found.append((path, Trajectory.load(path)))
    return found
