"""Behaviour-cloning plumbing between the learner-side sampler and the actor.

`BCMaterialisationSource` is the queue through which the learner-side BC sampler asks
for observations of recorded trajectories; `ReplayObservationCache` keeps the
observations that the actor side has materialised, keyed by (trajectory id, step).
The sampler and the BC loss that use them come with the trajectories issue.
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["BCMaterialisationSource", "MaterialisationRequest", "ReplayObservationCache"]

CacheKey = tuple[int, int]


class ReplayObservationCache:
    """A bounded, thread-safe cache of observations keyed by (trajectory id, step).

    When full, the least recently used observation is dropped. Observations are
    copied on the way in, so callers may pass views of shared memory.

    Args:
        capacity: observations kept.
    """

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 1:
            raise ValueError(
                f"replay observation cache capacity must be at least 1, got {capacity}"
            )
        self.capacity = capacity
        self._data: OrderedDict[CacheKey, npt.NDArray[Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def put(self, trajectory_id: int, step: int, observation: npt.NDArray[Any]) -> None:
        """Store (a copy of) the observation at `step` of trajectory `trajectory_id`."""
        key = (int(trajectory_id), int(step))
        with self._lock:
            self._data[key] = np.array(observation, copy=True)
            self._data.move_to_end(key)
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)

    def get(self, trajectory_id: int, step: int) -> npt.NDArray[Any] | None:
        """The cached observation, or None."""
        key = (int(trajectory_id), int(step))
        with self._lock:
            observation = self._data.get(key)
            if observation is None:
                self.misses += 1
                return None
            self.hits += 1
            self._data.move_to_end(key)
            return observation

    def missing(self, keys: list[CacheKey]) -> list[CacheKey]:
        """The keys that are not cached."""
        with self._lock:
            return [k for k in keys if k not in self._data]

    def discard_trajectory(self, trajectory_id: int) -> int:
        """Drop every observation of a trajectory; returns how many were dropped."""
        with self._lock:
            keys = [k for k in self._data if k[0] == trajectory_id]
            for key in keys:
                del self._data[key]
            return len(keys)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


@dataclass(frozen=True)
class MaterialisationRequest:
    """Observations wanted: `steps` of trajectory `trajectory_id`."""

    trajectory_id: int
    steps: tuple[int, ...]


class BCMaterialisationSource:
    """The queue of materialisation requests from the learner-side BC sampler to the actor.

    The sampler calls `request`; the actor takes requests with `take` and stores what
    it rebuilds in the `ReplayObservationCache`. Closing the source wakes and ends
    both sides.

    Args:
        max_pending: requests queued before `request` refuses more (returns False).
    """

    def __init__(self, max_pending: int = 64) -> None:
        self._queue: queue.Queue[MaterialisationRequest] = queue.Queue(maxsize=max_pending)
        self._closed = threading.Event()

    def request(self, trajectory_id: int, steps: list[int] | tuple[int, ...]) -> bool:
        """Ask for observations; False when the queue is full or the source is closed."""
        if self._closed.is_set():
            return False
        try:
            self._queue.put_nowait(MaterialisationRequest(int(trajectory_id), tuple(steps)))
        except queue.Full:
            return False
        return True

    def take(self, max_requests: int | None = None) -> list[MaterialisationRequest]:
        """Requests waiting now (never blocks)."""
        taken: list[MaterialisationRequest] = []
        while max_requests is None or len(taken) < max_requests:
            try:
                taken.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return taken

    @property
    def pending(self) -> int:
        """Requests waiting."""
        return self._queue.qsize()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Refuse further requests and drop those waiting."""
        self._closed.set()
        self.take()
