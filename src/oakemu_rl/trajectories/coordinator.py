"""Episode recording: every episode's start point, seed, actions, rewards and outcome.

The emulator is deterministic, so a recorded episode can be replayed from its start
point and seed. The coordinator keeps the best episodes (by return) and the winning
ones; restart pools and trajectory replay build on these records.
"""

from __future__ import annotations

import base64
import threading
from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class TrajectoryRecord:
    """One recorded episode."""

    env_id: int
    start_point: str
    seed: int | None
    actions: array[int] = field(default_factory=lambda: array("h"))
    rewards: array[float] = field(default_factory=lambda: array("f"))
    outcome: str | None = None
    episode_return: float = 0.0
    score: float = 0.0
    end_step: int = 0

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
        return cls(
            env_id=int(data["env_id"]),
            start_point=str(data["start_point"]),
            seed=None if data.get("seed") is None else int(data["seed"]),
            actions=actions,
            rewards=rewards,
            outcome=data.get("outcome"),
            episode_return=float(data["episode_return"]),
            score=float(data.get("score", 0.0)),
            end_step=int(data.get("end_step", 0)),
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
        self, env_id: int, *, start_point: str = "initial", seed: int | None = None
    ) -> None:
        if self.enabled:
            self._active[env_id] = TrajectoryRecord(env_id, start_point, seed)

    def record_step(self, env_id: int, action: int, reward: float) -> None:
        record = self._active.get(env_id)
        if record is not None:
            record.actions.append(action)
            record.rewards.append(reward)

    def record_random_step(self) -> None:
        """Count one random-controlled trajectory-replay step."""
        self.random_steps += 1

    def end_episode(
        self, env_id: int, *, outcome: str | None, episode_return: float, score: float, step: int
    ) -> TrajectoryRecord | None:
        """Finish an env's episode; keeps it if it is among the best or a win."""
        record = self._active.pop(env_id, None)
        if record is None:
            return None
        record.outcome = outcome
        record.episode_return = float(episode_return)
        record.score = float(score)
        record.end_step = int(step)
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
