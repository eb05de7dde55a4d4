"""RestartPool: machine states saved along episodes, so new episodes can start later in a game.

States are kept with the return their episode had reached when they were saved; when
the pool is full, a new state replaces the lowest-ranked one if it ranks higher.
`sample` draws uniformly, or in proportion to rank with `prioritise_by_return`.
"""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["RestartPool", "RestartState"]


@dataclass(frozen=True)
class RestartState:
    """One saved machine state and where it came from."""

    state: bytes
    episode_return: float
    episode_step: int
    seed: int | None = None


class RestartPool:
    """A bounded pool of saved machine states, sampled to start episodes from.

    Args:
        capacity: states kept; the lowest by episode return is dropped first.
        prioritise_by_return: sample in proportion to rank by return (else uniformly).
    """

    def __init__(self, capacity: int = 256, *, prioritise_by_return: bool = False) -> None:
        if capacity < 1:
            raise ValueError(f"restart pool capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.prioritise_by_return = prioritise_by_return
        self._entries: list[RestartState] = []
        self._lock = threading.Lock()
        self.total_added = 0
        self.total_sampled = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def add(
        self, state: bytes, *, episode_return: float, episode_step: int, seed: int | None = None
    ) -> bool:
        """Offer a state; returns whether it was kept."""
        entry = RestartState(bytes(state), float(episode_return), int(episode_step), seed)
        with self._lock:
            self.total_added += 1
            if len(self._entries) < self.capacity:
                self._entries.append(entry)
                return True
            worst = min(range(len(self._entries)), key=lambda i: self._entries[i].episode_return)
            if entry.episode_return <= self._entries[worst].episode_return:
                return False
            self._entries[worst] = entry
            return True

    def sample(self, rng: np.random.Generator) -> RestartState | None:
        """A state to start from (None when the pool is empty)."""
        with self._lock:
            if not self._entries:
                return None
            if self.prioritise_by_return and len(self._entries) > 1:
                order = np.argsort([e.episode_return for e in self._entries], kind="stable")
                ranks = np.empty(len(order))
                ranks[order] = np.arange(1, len(order) + 1)
                index = int(rng.choice(len(ranks), p=ranks / ranks.sum()))
            else:
                index = int(rng.integers(len(self._entries)))
            self.total_sampled += 1
            return self._entries[index]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @property
    def best_return(self) -> float | None:
        """The highest episode return among the kept states."""
        with self._lock:
            return max((e.episode_return for e in self._entries), default=None)

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (machine states base64-encoded)."""
        with self._lock:
            return {
                "capacity": self.capacity,
                "total_added": self.total_added,
                "total_sampled": self.total_sampled,
                "entries": [
                    {
                        "state": base64.b64encode(e.state).decode(),
                        "episode_return": e.episode_return,
                        "episode_step": e.episode_step,
                        "seed": e.seed,
                    }
                    for e in self._entries
                ],
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._lock:
            entries = [
                RestartState(
                    base64.b64decode(e["state"]),
                    float(e["episode_return"]),
                    int(e["episode_step"]),
                    None if e.get("seed") is None else int(e["seed"]),
                )
                for e in state.get("entries", [])
            ]
            self._entries = entries[-self.capacity :]
            self.total_added = int(state.get("total_added", len(entries)))
            self.total_sampled = int(state.get("total_sampled", 0))
