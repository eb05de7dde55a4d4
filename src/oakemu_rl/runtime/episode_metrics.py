"""EpisodeMetrics: episode totals and recent-episode statistics."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass
class EpisodeTotals:
    """The episode counters every actor keeps (part of its checkpointed runtime state)."""

    total_episodes: int = 0
    total_wins: int = 0
    total_losses: int = 0
    total_truncated: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeTotals:
        return cls(**{k: int(data.get(k, 0)) for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class EpisodeRecord:
    """One finished episode."""

    episode_return: float
    length: int
    score: float
    outcome: str | None
    shaped_return: float
    step: int

    @property
    def won(self) -> bool:
        return self.outcome == "win"


REWARD_TERM_PREFIX = "episode/reward/"
"""The scalar of an episode's game reward from one source: `episode/reward/<term>`."""


class EpisodeMetrics:
    """Counts wins, losses and truncations and keeps a window of recent episodes.

    An episode's game reward by source (`reward_terms`) is logged as one
    `episode/reward/<term>` scalar per term: from the first episode in which the term
    is non-zero on, and then for every episode (0.0 when it has none of that term).
    """

    def __init__(self, window: int = 100) -> None:
        self.window = window
        self.totals = EpisodeTotals()
        self.recent: deque[EpisodeRecord] = deque(maxlen=window)
        self.reward_terms: list[str] = []
        """Every reward term seen so far, in the order first seen."""
        self._lock = threading.Lock()

    def record(
        self,
        *,
        episode_return: float,
        length: int,
        score: float,
        outcome: str | None,
        step: int,
        shaped_return: float | None = None,
        reward_terms: dict[str, float] | None = None,
    ) -> dict[str, float]:
        """Count one finished episode; returns the scalars to log for it.

        `reward_terms` is the episode's game reward by source (term name: sum).
        """
        record = EpisodeRecord(
            float(episode_return),
            int(length),
            float(score),
            outcome,
            float(episode_return if shaped_return is None else shaped_return),
            int(step),
        )
        with self._lock:
            t = self.totals
            t.total_episodes += 1
            if outcome == "win":
                t.total_wins += 1
            elif outcome == "loss":
                t.total_losses += 1
            elif outcome == "truncated":
                t.total_truncated += 1
            self.recent.append(record)
            scalars = {
                "episode/return": record.episode_return,
                "episode/shaped_return": record.shaped_return,
                "episode/length": float(record.length),
                "episode/score": record.score,
                "episode/return_mean": self._mean("episode_return"),
                "episode/score_mean": self._mean("score"),
                "episode/count": float(t.total_episodes),
                "episode/wins": float(t.total_wins),
                "episode/losses": float(t.total_losses),
                "episode/truncated": float(t.total_truncated),
                "episode/win_rate": self._win_rate(),
            }
            terms = reward_terms or {}
            known = self.reward_terms
            known.extend(name for name in terms if name not in known)
            for name in known:
                scalars[REWARD_TERM_PREFIX + name] = float(terms.get(name, 0.0))
            return scalars

    def _mean(self, attribute: str) -> float:
        if not self.recent:
            return float("nan")
        return float(np.mean([getattr(r, attribute) for r in self.recent]))

    def _win_rate(self) -> float:
        if not self.recent:
            return float("nan")
        return sum(r.won for r in self.recent) / len(self.recent)

    @property
    def mean_return(self) -> float:
        """Mean return over the recent window (NaN before the first episode)."""
        with self._lock:
            return self._mean("episode_return")

    @property
    def mean_score(self) -> float:
        """Mean score over the recent window."""
        with self._lock:
            return self._mean("score")

    @property
    def win_rate(self) -> float:
        """Fraction of wins over the recent window."""
        with self._lock:
            return self._win_rate()

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        with self._lock:
            return {
                "window": self.window,
                "totals": self.totals.to_dict(),
                "recent": [asdict(r) for r in self.recent],
                "reward_terms": list(self.reward_terms),
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._lock:
            self.totals = EpisodeTotals.from_dict(state["totals"])
            self.recent = deque(
                (EpisodeRecord(**r) for r in state.get("recent", [])), maxlen=self.window
            )
            # Absent from checkpoints written before reward terms were logged.
            names = state.get("reward_terms") or []
            self.reward_terms = [str(name) for name in names]

    def restore_totals(self, totals: EpisodeTotals) -> None:
        with self._lock:
            self.totals = EpisodeTotals(**totals.to_dict())
