"""Behaviour cloning on demonstrations: the observation cache, the sampler and the actor side.

Demonstration observations are not kept with the demonstrations; they are rebuilt by
replaying them (`DemonstrationSet.observations`), which costs emulator steps. So:

- `ReplayObservationCache` keeps rebuilt observations, keyed by (demonstration id, step),
  in an LRU cache bounded in bytes (`bc.cache_bytes`). Before training, the experiment
  fills it with as many demonstration steps as fit (`prefill_cache`): a demonstration set
  that fits is never rebuilt again.
- `BCSampler` (learner side) draws demonstration steps uniformly for each minibatch's BC
  loss. It takes what the cache holds now; a step that is not cached is asked for through
  the `BCMaterialisationSource` and used by a later minibatch, once it is. It never waits.
- `BCMaterialiser` (actor side) takes the requests and rebuilds the observations into the
  cache: between results, and while the actor waits for the learner.
- `bc_coefficient` is the BC loss's weight, falling linearly with the env steps.
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..envs.oakemu_env import OakEmuEnv
from ..trajectories.materialise import replay
from .config import PPOBCSettings

if TYPE_CHECKING:
    from ..trajectories.demonstrations import DemonstrationSet

__all__ = [
    "BCBatch",
    "BCMaterialisationSource",
    "BCMaterialiser",
    "BCSampler",
    "MaterialisationRequest",
    "ReplayObservationCache",
    "bc_coefficient",
    "prefill_cache",
]

CacheKey = tuple[int, int]


def bc_coefficient(settings: PPOBCSettings, env_steps: int) -> float:
    """The BC loss's weight after `env_steps`: `coef` falling linearly to `final_coef`
    over `decay_steps`, then staying there."""
    done = min(1.0, max(0, env_steps) / settings.decay_steps)
    return settings.coef + (settings.final_coef - settings.coef) * done


class ReplayObservationCache:
    """A thread-safe LRU cache of observations keyed by (trajectory id, step), bounded in bytes.

    Each observation counts its `nbytes`; storing one that does not fit drops the least
    recently used ones first. Observations are copied on the way in (callers may pass
    views of shared memory) and handed out read-only.

    Args:
        max_bytes: memory for the observations.
    """

    def __init__(self, max_bytes: int = 128 * 2**20) -> None:
        if max_bytes < 1:
            raise ValueError(
                f"replay observation cache max_bytes must be at least 1, got {max_bytes}"
            )
        self.max_bytes = int(max_bytes)
        self._data: OrderedDict[CacheKey, npt.NDArray[Any]] = OrderedDict()
        self._nbytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    @property
    def nbytes(self) -> int:
        """Bytes of the observations held."""
        return self._nbytes

    def fits(self, nbytes: int) -> bool:
        """Whether `nbytes` more fit without dropping anything."""
        with self._lock:
            return self._nbytes + nbytes <= self.max_bytes

    def put(self, trajectory_id: int, step: int, observation: npt.NDArray[Any]) -> bool:
        """Store (a copy of) the observation at `step` of trajectory `trajectory_id`; False
        (nothing stored) when it alone is larger than `max_bytes`."""
        key = (int(trajectory_id), int(step))
        stored = np.array(observation, copy=True)
        stored.setflags(write=False)
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._nbytes -= old.nbytes
            if stored.nbytes > self.max_bytes:
                return False
            while self._data and self._nbytes + stored.nbytes > self.max_bytes:
                _, dropped = self._data.popitem(last=False)
                self._nbytes -= dropped.nbytes
            self._data[key] = stored
            self._nbytes += stored.nbytes
            return True

    def get(self, trajectory_id: int, step: int) -> npt.NDArray[Any] | None:
        """The cached observation (read-only), or None."""
        return self.get_many([(trajectory_id, step)])[0]

    def get_many(self, keys: Sequence[CacheKey]) -> list[npt.NDArray[Any] | None]:
        """The cached observation (read-only) or None for each key, under one lock."""
        found: list[npt.NDArray[Any] | None] = []
        with self._lock:
            for trajectory_id, step in keys:
                key = (int(trajectory_id), int(step))
                observation = self._data.get(key)
                if observation is None:
                    self.misses += 1
                else:
                    self.hits += 1
                    self._data.move_to_end(key)
                found.append(observation)
        return found

    def missing(self, keys: list[CacheKey]) -> list[CacheKey]:
        """The keys that are not cached."""
        with self._lock:
            return [k for k in keys if k not in self._data]

    def discard_trajectory(self, trajectory_id: int) -> int:
        """Drop every observation of a trajectory; returns how many were dropped."""
        with self._lock:
            keys = [k for k in self._data if k[0] == trajectory_id]
            for key in keys:
                self._nbytes -= self._data.pop(key).nbytes
            return len(keys)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._nbytes = 0


def prefill_cache(
    cache: ReplayObservationCache,
    demonstrations: DemonstrationSet,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Cache the observations of demonstration steps, demonstration by demonstration from
    the first step, until the next one would not fit; returns how many were cached.

    Replays each demonstration once from its start (in an env of its own, so it may run
    beside other users of `demonstrations`); `progress` is called with the steps done.
    """
    env = OakEmuEnv(demonstrations.game, demonstrations.observation_config)
    cached = 0
    try:
        for demo in demonstrations:
            for step in replay(env, demo.trajectory):
                if not cache.fits(step.observation.nbytes):
                    return cached
                cache.put(demo.id, step.index, step.observation)
                cached += 1
            if progress is not None:
                progress(demo.length)
    finally:
        env.close()
    return cached


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


@dataclass(frozen=True)
class BCBatch:
    """Demonstration steps for one BC loss: their observations, demonstrated actions and
    (demonstration id, step) keys."""

    observations: npt.NDArray[Any]
    actions: npt.NDArray[np.int64]
    keys: list[CacheKey]


class BCSampler:
    """Draws demonstration steps for the BC loss (learner side); never waits.

    Each step is drawn uniformly from every demonstration step whose action the policy
    may take (`allowed_actions`). The cached ones are used at once; the others are asked
    for through `source` and used by a later `sample`, once the actor has cached them, so
    the steps used stay uniform however much of the demonstrations the cache holds.

    Args:
        demonstrations: the run's demonstrations (their actions are the BC targets).
        cache: where the observations are looked up.
        source: where missing observations are asked for.
        batch_size: demonstration steps per `sample`.
        rng: the sampler's random generator.
        allowed_actions: the actions the policy may take (None: all).
        min_rows: fewer cached steps than this and `sample` returns None (the minibatch
            goes without BC); default a quarter of `batch_size`.
    """

    def __init__(
        self,
        demonstrations: DemonstrationSet,
        cache: ReplayObservationCache,
        source: BCMaterialisationSource,
        batch_size: int,
        rng: np.random.Generator,
        *,
        allowed_actions: Sequence[int] | None = None,
        min_rows: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        ids, steps, actions = [], [], []
        for demo in demonstrations:
            acts = demo.trajectory.actions.astype(np.int64)
            keep = np.ones(len(acts), dtype=np.bool_)
            if allowed_actions is not None:
                keep = np.isin(acts, np.asarray(list(allowed_actions), dtype=np.int64))
            index = np.flatnonzero(keep)
            ids.append(np.full(len(index), demo.id, dtype=np.int32))
            steps.append(index.astype(np.int32))
            actions.append(acts[index])
        self._ids = np.concatenate(ids) if ids else np.zeros(0, np.int32)
        self._steps = np.concatenate(steps) if steps else np.zeros(0, np.int32)
        self._actions = np.concatenate(actions) if actions else np.zeros(0, np.int64)
        if not len(self._ids):
            raise ValueError("no demonstration step has an action the policy may take")
        self.cache = cache
        self.source = source
        self.batch_size = batch_size
        self.rng = rng
        self.min_rows = max(1, batch_size // 4) if min_rows is None else min_rows
        # Drawn steps asked for (or drawn in a skipped sample), to be used once cached;
        # the oldest are forgotten beyond `max_deferred`.
        self._deferred: OrderedDict[int, None] = OrderedDict()
        self.max_deferred = 4 * batch_size
        self.samples = 0
        self.skipped = 0
        self.drawn = 0
        self.drawn_cached = 0

    @property
    def steps(self) -> int:
        """Demonstration steps drawn from."""
        return len(self._ids)

    @property
    def hit_rate(self) -> float:
        """Share of the drawn steps that were cached when drawn."""
        return self.drawn_cached / self.drawn if self.drawn else 0.0

    def _keys(self, rows: Sequence[int] | npt.NDArray[Any]) -> list[CacheKey]:
        return [(int(self._ids[r]), int(self._steps[r])) for r in rows]

    def _defer(self, rows: Sequence[int]) -> None:
        for row in rows:
            self._deferred[row] = None
        while len(self._deferred) > self.max_deferred:
            self._deferred.popitem(last=False)

    def sample(self) -> BCBatch | None:
        """`batch_size` demonstration steps (fewer when not all are cached), or None when
        fewer than `min_rows` are."""
        rows: list[int] = []
        observations: list[npt.NDArray[Any]] = []
        # First the steps drawn earlier that the actor has cached since.
        earlier = list(self._deferred)
        for row, observation in zip(earlier, self.cache.get_many(self._keys(earlier)), strict=True):
            if observation is not None and len(rows) < self.batch_size:
                del self._deferred[row]
                rows.append(row)
                observations.append(observation)
        fresh = self.rng.integers(0, len(self._ids), size=self.batch_size - len(rows))
        missing: dict[int, list[int]] = {}
        for row, observation in zip(fresh, self.cache.get_many(self._keys(fresh)), strict=True):
            self.drawn += 1
            if observation is not None:
                self.drawn_cached += 1
                rows.append(int(row))
                observations.append(observation)
            elif int(row) not in self._deferred:
                missing.setdefault(int(self._ids[row]), []).append(int(row))
        for demo_id, wanted in missing.items():
            if not self.source.request(demo_id, [int(self._steps[r]) for r in wanted]):
                break  # the actor is behind: these steps are dropped, not deferred
            self._defer(wanted)
        self.samples += 1
        if len(rows) < self.min_rows:
            self.skipped += 1
            self._defer(rows)
            return None
        return BCBatch(np.stack(observations), self._actions[rows], self._keys(rows))

    def state_dict(self) -> dict[str, Any]:
        """The generator's state (what is drawn next)."""
        return {"rng": dict(self.rng.bit_generator.state)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]


class BCMaterialiser:
    """Rebuilds the observations the BC sampler asks for into the cache (actor side).

    `serve` spends a budget counted in emulator steps: an observation costs the steps
    replayed from the nearest machine state saved along its demonstration (up to
    `max_cost`), so the actor can bound the time it takes from its envs.

    Args:
        source: the sampler's requests.
        cache: where rebuilt observations go.
        demonstrations: the run's demonstrations (prepared: states saved along them).
    """

    def __init__(
        self,
        source: BCMaterialisationSource,
        cache: ReplayObservationCache,
        demonstrations: DemonstrationSet,
    ) -> None:
        self.source = source
        self.cache = cache
        self.demonstrations = demonstrations
        self._back = demonstrations.observation_config.frame_stack - 1
        self.max_cost = demonstrations.stride + self._back
        self._pending: deque[CacheKey] = deque()
        self.materialised = 0

    @property
    def pending(self) -> int:
        """Requests waiting (taken or not)."""
        return len(self._pending) + self.source.pending

    def cost(self, demo_id: int, step: int) -> int:
        """Emulator steps that rebuilding the observation before `step` replays (at least 1)."""
        saved = self.demonstrations.states(demo_id).steps
        index = max(int(np.searchsorted(saved, step - self._back, side="right")) - 1, 0)
        return max(1, step - saved[index])

    def serve(self, budget: float) -> float:
        """Rebuild requested observations, while the next one's cost fits in `budget`;
        returns the emulator steps spent."""
        spent = 0.0
        while True:
            if not self._pending:
                for request in self.source.take(1):
                    self._pending.extend((request.trajectory_id, s) for s in request.steps)
                if not self._pending:
                    return spent
            demo_id, step = self._pending[0]
            if (demo_id, step) in self.cache:
                self._pending.popleft()
                continue
            cost = self.cost(demo_id, step)
            if spent + cost > budget:
                return spent
            self._pending.popleft()
            for at, observation in self.demonstrations.observations(demo_id, [step]).items():
                self.cache.put(demo_id, at, observation)
            self.materialised += 1
            spent += cost
