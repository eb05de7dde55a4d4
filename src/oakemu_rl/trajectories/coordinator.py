"""Episode recording: every episode's start point, seed, actions, rewards and outcome.

The emulator is deterministic, so a recorded episode can be replayed from its start
point and seed. The coordinator keeps the best episodes (by return) and the winning
ones; restart pools and trajectory replay build on these records.
"""

from __future__ import annotations

import base64
import threading
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .trajectory_file import SUFFIX, Trajectory


@dataclass
class TrajectoryRecord:
    """One recorded episode."""

    env_id: int
    start_point: str
    seed: int | None
    start_state: bytes | None = None
    start_step: int = 0
    actions: array[int] = field(default_factory=lambda: array("h"))
    rewards: array[float] = field(default_factory=lambda: array("f"))
    outcome: str | None = None
    episode_return: float = 0.0
    score: float = 0.0
    end_step: int = 0
    lives_lost: int = 0

    @property
    def length(self) -> int:
        return len(self.actions)

    @property
    def won(self) -> bool:
        return self.outcome == "win"

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "start_point": self.start_point,
            "seed": self.seed,
            "start_state": None
            if self.start_state is None
            else base64.b64encode(zlib.compress(self.start_state, 1)).decode("ascii"),
            "start_step": self.start_step,
            "lives_lost": self.lives_lost,
            "actions": base64.b64encode(self.actions.tobytes()).decode(),
            "rewards": base64.b64encode(self.rewards.tobytes()).decode(),
            "outcome": self.outcome,
            "episode_return": self.episode_return,
            "score": self.score,
            "end_step": self.end_step,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrajectoryRecord:
        actions: array[int] = array("h")
        actions.frombytes(base64.b64decode(data["actions"]))
        rewards: array[float] = array("f")
        rewards.frombytes(base64.b64decode(data["rewards"]))
        packed = data.get("start_state")
        return cls(
            env_id=int(data["env_id"]),
            start_point=str(data["start_point"]),
            seed=None if data.get("seed") is None else int(data["seed"]),
            start_state=None if packed is None else zlib.decompress(base64.b64decode(packed)),
            start_step=int(data.get("start_step", 0)),
            actions=actions,
            rewards=rewards,
            outcome=data.get("outcome"),
            episode_return=float(data["episode_return"]),
            score=float(data.get("score", 0.0)),
            end_step=int(data.get("end_step", 0)),
            lives_lost=int(data.get("lives_lost", 0)),
        )

    @property
    def file_name(self) -> str:
        """A name that tells this record's file apart from the run's others."""
        return f"{self.outcome or 'open'}-step{self.end_step:09d}-env{self.env_id}{SUFFIX}"

    def to_trajectory(self, game: str, game_file: str, game_sha256: str) -> Trajectory | None:
        """The record as a trajectory file's content (None if it has no known start)."""
        if self.start_state is None and self.seed is None:
            return None
        return Trajectory(
            game=game,
            game_file=game_file,
            game_sha256=game_sha256,
            actions=np.frombuffer(self.actions.tobytes(), dtype=np.int16).copy(),
            rewards=np.frombuffer(self.rewards.tobytes(), dtype=np.float32).copy(),
            start_seed=None if self.start_state is not None else self.seed,
            start_state=self.start_state,
            start_step=self.start_step,
            outcome=self.outcome,
            episode_return=self.episode_return,
            score=self.score,
            lives_lost=self.lives_lost,
            source="run",
            info={"env_step": self.end_step, "start_point": self.start_point},
        )


class TrajectoryEpisodeCoordinator:
    """Records the episodes of an actor's envs and keeps the best and the winning ones.

    Call `begin_episode` when an env starts an episode, `record_step` for each of its
    steps and `end_episode` when it ends. `record_random_step` counts steps that a
    trajectory replay handed to random actions.
    """

    def __init__(self, keep_best: int = 16, keep_wins: int = 16, enabled: bool = True) -> None:
        self.keep_best = keep_best
        self.keep_wins = keep_wins
        self.enabled = enabled
        self._lock = threading.Lock()
        self._active: dict[int, TrajectoryRecord] = {}
        self.best: list[TrajectoryRecord] = []
        self.wins: list[TrajectoryRecord] = []
        self.total_recorded = 0
        self.random_steps = 0

    def begin_episode(
        self,
        env_id: int,
        *,
        start_point: str = "initial",
        seed: int | None = None,
        start_state: bytes | None = None,
        start_step: int = 0,
    ) -> None:
        """An env began an episode: from the game's start drawn from `seed`, or from
        `start_state` (a restart or backplay state that was step `start_step` of its
        episode)."""
        if self.enabled:
            self._active[env_id] = TrajectoryRecord(
                env_id, start_point, seed, start_state, start_step
            )

    def record_step(self, env_id: int, action: int, reward: float) -> None:
        record = self._active.get(env_id)
        if record is not None:
            record.actions.append(action)
            record.rewards.append(reward)

    def record_random_step(self) -> None:
        """Count one random-controlled trajectory-replay step."""
        self.random_steps += 1

    def end_episode(
        self,
        env_id: int,
        *,
        outcome: str | None,
        episode_return: float,
        score: float,
        step: int,
        lives_lost: int = 0,
    ) -> TrajectoryRecord | None:
        """Finish an env's episode; keeps it if it is among the best or a win."""
        record = self._active.pop(env_id, None)
        if record is None:
            return None
        record.outcome = outcome
        record.episode_return = float(episode_return)
        record.score = float(score)
        record.end_step = int(step)
        record.lives_lost = int(lives_lost)
        with self._lock:
            self.total_recorded += 1
            if self.keep_best > 0 and (
                len(self.best) < self.keep_best
                or record.episode_return > self.best[-1].episode_return
            ):
                self.best.append(record)
                self.best.sort(key=lambda r: r.episode_return, reverse=True)
                del self.best[self.keep_best :]
            if record.won and self.keep_wins > 0:
                self.wins.append(record)
                del self.wins[: -self.keep_wins]
        return record

    def discard_active(self) -> None:
        """Drop episodes in progress (their envs are being restarted)."""
        self._active.clear()

    @property
    def best_return(self) -> float:
        with self._lock:
            return self.best[0].episode_return if self.best else float("nan")

    def summary(self) -> dict[str, Any]:
        with self._lock:
            returns = [r.episode_return for r in self.best]
            return {
                "recorded": self.total_recorded,
                "kept_best": len(self.best),
                "kept_wins": len(self.wins),
                "best_return": float(np.max(returns)) if returns else None,
                "random_steps": self.random_steps,
            }

    def write(self, directory: Path, game: str, game_file: str, game_sha256: str) -> int:
        """Write the kept episodes (the wins and the best) as trajectory files into
        `directory`, removing files of episodes no longer kept; returns how many are kept."""
        with self._lock:
            records = {r.file_name: r for r in [*self.wins, *self.best]}
        directory.mkdir(parents=True, exist_ok=True)
        for path in directory.glob(f"*{SUFFIX}"):
            if path.name not in records:
                path.unlink(missing_ok=True)
        for name, record in records.items():
            path = directory / name
            if path.exists():
                continue
            trajectory = record.to_trajectory(game, game_file, game_sha256)
            if trajectory is not None:
                trajectory.save(path)
        return len(records)

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (episodes in progress are not included)."""
        with self._lock:
            return {
                "best": [r.to_dict() for r in self.best],
                "wins": [r.to_dict() for r in self.wins],
                "total_recorded": self.total_recorded,
                "random_steps": self.random_steps,
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._lock:
            self.best = [TrajectoryRecord.from_dict(r) for r in state.get("best", [])]
            self.wins = [TrajectoryRecord.from_dict(r) for r in state.get("wins", [])]
            self.total_recorded = int(state.get("total_recorded", 0))
            self.random_steps = int(state.get("random_steps", 0))
        self._active.clear()
