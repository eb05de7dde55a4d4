"""RestartPool: machine states saved along episodes, so new episodes can start later in a game.

States come from live training episodes and from demonstrations. Each keeps where it
came from (its episode's return and step, a progress variable's value) and how episodes
restarted from it went (restarts, failures). `sample` draws by the configured priority:

- ``uniform``: every state alike;
- ``return``: in proportion to rank by the return its episode had reached;
- ``progress``: in proportion to rank by the progress variable (later in the game first);
- ``failure``: in proportion to (failures + 1) / (restarts + 2), so states the agent
  keeps failing from come back most, and ones it has mastered fade out;
- ``novelty``: in proportion to 1 / sqrt(visits of the state's cell), the visit counts of
  a count-based novelty bonus (`NoveltyBonus`), so episodes restart most from situations
  the agent has seen least.

The pool is bounded in states and in bytes. A full pool replaces its lowest-ranked live
state (the oldest, for ``uniform`` and ``failure``; the most visited, for ``novelty``);
demonstration states are replaced only by other demonstration states.
"""

from __future__ import annotations

import base64
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

__all__ = ["Priority", "RestartPool", "RestartState"]

Priority = Literal["uniform", "return", "progress", "failure", "novelty"]


@dataclass(frozen=True)
class RestartState:
    """One saved machine state, where it came from and how restarts from it went."""

    state: bytes
    episode_return: float
    episode_step: int
    seed: int | None = None
    progress: float | None = None
    source: str = "live"
    restarts: int = 0
    failures: int = 0
    id: int = 0
    cell: int | None = None
    """The novelty cell of the state's observation (priority ``novelty``)."""

    @property
    def failure_rate(self) -> float:
        """Failures over restarts, shrunk towards one half: (failures + 1) / (restarts + 2)."""
        return (self.failures + 1) / (self.restarts + 2)


class RestartPool:
    """A bounded pool of saved machine states, sampled to start episodes from.

    Args:
        capacity: states kept at most.
        priority: how states are drawn (see the module docstring).
        max_bytes: memory the states may take at most.
        visits: how often a novelty cell has been visited (needed by priority ``novelty``).
    """

    def __init__(
        self,
        capacity: int = 256,
        *,
        priority: Priority = "uniform",
        max_bytes: int = 256 * 2**20,
        visits: Callable[[int], int] | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"restart pool capacity must be at least 1, got {capacity}")
        if max_bytes < 1:
            raise ValueError(f"restart pool max_bytes must be at least 1, got {max_bytes}")
        if priority not in ("uniform", "return", "progress", "failure", "novelty"):
            raise ValueError(
                f"restart pool priority {priority!r} is not uniform, return, progress, "
                "failure or novelty"
            )
        if priority == "novelty" and visits is None:
            raise ValueError("restart pool priority 'novelty' needs the cells' visit counts")
        self._visits = visits
        self.capacity = capacity
        self.priority: Priority = priority
        self.max_bytes = max_bytes
        self._entries: list[RestartState] = []
        self._lock = threading.Lock()
        self._next_id = 1
        self.total_added = 0
        self.total_sampled = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes of the saved states."""
        with self._lock:
            return sum(len(e.state) for e in self._entries)

    @property
    def entries(self) -> list[RestartState]:
        """A copy of the kept states."""
        with self._lock:
            return list(self._entries)

    # -- adding -----------------------------------------------------------------------------

    def _keep_value(self, entry: RestartState) -> float:
        """Higher is kept longer."""
        if self.priority == "return":
            return entry.episode_return
        if self.priority == "progress":
            return entry.progress if entry.progress is not None else float("-inf")
        if self.priority == "novelty":
            return -float(self._cell_visits(entry))
        return float(entry.id)  # uniform, failure: the newest are kept

    def _cell_visits(self, entry: RestartState) -> int:
        if entry.cell is None or self._visits is None:
            return 1
        return max(1, self._visits(entry.cell))

    def add(
        self,
        state: bytes,
        *,
        episode_return: float,
        episode_step: int,
        seed: int | None = None,
        progress: float | None = None,
        source: str = "live",
        cell: int | None = None,
    ) -> bool:
        """Offer a state; returns whether it was kept."""
        size = len(state)
        if size > self.max_bytes:
            return False
        with self._lock:
            entry = RestartState(
                bytes(state),
                float(episode_return),
                int(episode_step),
                seed,
                None if progress is None else float(progress),
                source,
                id=self._next_id,
                cell=cell,
            )
            self._next_id += 1
            self.total_added += 1
            used = sum(len(e.state) for e in self._entries)
            while self._entries and (
                len(self._entries) >= self.capacity or used + size > self.max_bytes
            ):
                victims = [i for i, e in enumerate(self._entries) if e.source == source]
                if source != "live":
                    victims = victims or [
                        i for i, e in enumerate(self._entries) if e.source == "live"
                    ]
                if not victims:
                    return False
                worst = min(victims, key=lambda i: self._keep_value(self._entries[i]))
                if self._keep_value(entry) < self._keep_value(self._entries[worst]):
                    return False
                used -= len(self._entries[worst].state)
                del self._entries[worst]
            self._entries.append(entry)
            return True

    # -- sampling ---------------------------------------------------------------------------

    def _weights(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        entries = self._entries
        if self.priority == "failure":
            return np.array([e.failure_rate for e in entries])
        if self.priority == "novelty":
            return 1.0 / np.sqrt([self._cell_visits(e) for e in entries])
        if self.priority in ("return", "progress"):
            key = [
                e.episode_return
                if self.priority == "return"
                else (e.progress if e.progress is not None else float("-inf"))
                for e in entries
            ]
            order = np.argsort(key, kind="stable")
            ranks = np.empty(len(order))
            ranks[order] = np.arange(1, len(order) + 1)
            return ranks
        return np.ones(len(entries))

    def sample(self, rng: np.random.Generator) -> RestartState | None:
        """A state to start from (None when the pool is empty)."""
        with self._lock:
            if not self._entries:
                return None
            weights = self._weights()
            index = int(rng.choice(len(weights), p=weights / weights.sum()))
            self.total_sampled += 1
            return self._entries[index]

    def report(self, entry_id: int, failed: bool) -> None:
        """How an episode restarted from state `entry_id` went (a dropped state is ignored)."""
        with self._lock:
            for i, entry in enumerate(self._entries):
                if entry.id == entry_id:
                    self._entries[i] = replace(
                        entry, restarts=entry.restarts + 1, failures=entry.failures + int(failed)
                    )
                    return

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @property
    def best_return(self) -> float | None:
        """The highest episode return among the kept states."""
        with self._lock:
            return max((e.episode_return for e in self._entries), default=None)

    # -- checkpoints ------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (machine states zlib-compressed and base64-encoded)."""
        with self._lock:
            return {
                "capacity": self.capacity,
                "priority": self.priority,
                "total_added": self.total_added,
                "total_sampled": self.total_sampled,
                "next_id": self._next_id,
                "entries": [
                    {
                        "state": base64.b64encode(zlib.compress(e.state, 1)).decode("ascii"),
                        "compressed": True,
                        "episode_return": e.episode_return,
                        "episode_step": e.episode_step,
                        "seed": e.seed,
                        "progress": e.progress,
                        "source": e.source,
                        "restarts": e.restarts,
                        "failures": e.failures,
                        "id": e.id,
                        "cell": e.cell,
                    }
                    for e in self._entries
                ],
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        entries = []
        for n, e in enumerate(state.get("entries", [])):
            raw = base64.b64decode(e["state"])
            entries.append(
                RestartState(
                    zlib.decompress(raw) if e.get("compressed") else raw,
                    float(e["episode_return"]),
                    int(e["episode_step"]),
                    None if e.get("seed") is None else int(e["seed"]),
                    None if e.get("progress") is None else float(e["progress"]),
                    str(e.get("source", "live")),
                    int(e.get("restarts", 0)),
                    int(e.get("failures", 0)),
                    int(e.get("id", n + 1)),
                    None if e.get("cell") is None else int(e["cell"]),
                )
            )
        with self._lock:
            self._entries = entries[-self.capacity :]
            self.total_added = int(state.get("total_added", len(entries)))
            self.total_sampled = int(state.get("total_sampled", 0))
            self._next_id = int(state.get("next_id", max((e.id for e in entries), default=0) + 1))
