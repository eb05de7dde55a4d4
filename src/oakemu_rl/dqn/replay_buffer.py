"""ReplayBuffer: uniform or prioritized replay of n-step transitions, each frame stored once.

Transitions arrive per env in order (`add`). The buffer keeps, for each env, the
frame ids of its current observation and the last n steps, and emits an n-step
transition (obs, action, n-step return, discount, next obs) once n steps are known
or the episode ends. Observations made of `frame_stack` frames (stacked on axis 0)
are stored as frames: each new observation adds only its newest frame, and a
transition refers to its frames by id. Capacity is counted in transitions; the
frame store holds a few more frames than that, and a transition whose frames have
been overwritten is never sampled.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .sum_tree import SumTree

IdArray = npt.NDArray[np.int64]


@dataclass
class Transition:
    """One env step as the actor stages it."""

    env_id: int
    observation: npt.NDArray[Any]
    action: int
    reward: float
    next_observation: npt.NDArray[Any]
    terminated: bool
    """Nothing is bootstrapped after this step: the episode terminated (or, with
    `episodic_life`, a life was lost; the env's next step then opens a new stream)."""
    truncated: bool
    episode_start: bool = False
    """True for the first step of an episode (its observation came from a reset)."""


@dataclass
class ReplayBatch:
    """A sampled batch. The target is `returns + discounts * Q(next_observations)`."""

    observations: npt.NDArray[Any]
    actions: npt.NDArray[np.int64]
    returns: npt.NDArray[np.float32]
    discounts: npt.NDArray[np.float32]
    next_observations: npt.NDArray[Any]
    weights: npt.NDArray[np.float32]
    indices: npt.NDArray[np.int64]
    generations: npt.NDArray[np.int64]


@dataclass
class _Stream:
    ids: IdArray
    pending: deque[tuple[IdArray, int, float]] = field(default_factory=deque)


class ReplayBuffer:
    """Experience replay with n-step returns, frame de-duplication and optional priorities.

    Args:
        capacity: transitions kept (the oldest are overwritten).
        observation_shape: shape of one observation.
        observation_dtype: dtype of observations (uint8 for screens).
        frame_stack: frames stacked on axis 0 of an observation (1 for vectors).
        n_step: steps of the n-step return.
        gamma: discount factor.
        n_step_start: when set, the n-step return is annealed from this many steps to
            `n_step`, linearly over the first `n_step_anneal` env steps (as BBF anneals it
            from 10 to 3); each transition keeps the n it was written with (its discount
            is gamma^n, or 0 where the episode ended). The env steps are those given to
            `note_env_steps`, or the transitions written where that is more.
        n_step_anneal: env steps over which n falls (or rises) to `n_step`.
        prioritized: sample by priority (sum tree) instead of uniformly.
        alpha: priority exponent.
        priority_eps: added to |TD error| before the exponent.
        frame_capacity: frames stored (default: capacity plus an eighth, plus 1024).
    """

    def __init__(
        self,
        capacity: int,
        observation_shape: tuple[int, ...],
        *,
        observation_dtype: npt.DTypeLike = np.uint8,
        frame_stack: int = 1,
        n_step: int = 1,
        gamma: float = 0.99,
        prioritized: bool = False,
        alpha: float = 0.6,
        priority_eps: float = 1e-6,
        frame_capacity: int | None = None,
        n_step_start: int | None = None,
        n_step_anneal: int = 1,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        shape = tuple(int(s) for s in observation_shape)
        if frame_stack < 1 or shape[0] % frame_stack:
            raise ValueError(
                f"observation shape {shape} cannot be split into {frame_stack} stacked frames"
            )
        self.capacity = capacity
        self.observation_shape = shape
        self.observation_dtype = np.dtype(observation_dtype)
        self.frame_stack = frame_stack
        self.frame_shape = (shape[0] // frame_stack, *shape[1:])
        if n_step < 1 or (n_step_start is not None and n_step_start < 1) or n_step_anneal < 1:
            raise ValueError(
                f"n_step ({n_step}), n_step_start ({n_step_start}) and n_step_anneal "
                f"({n_step_anneal}) must be at least 1"
            )
        self.n_step = n_step
        self.n_step_start = n_step_start
        self.n_step_anneal = n_step_anneal
        self._env_steps = 0
        self.gamma = gamma
        self.prioritized = prioritized
        self.alpha = alpha
        self.priority_eps = priority_eps
        self.frame_capacity = frame_capacity or capacity + capacity // 8 + 1024
        self.lock = threading.RLock()

        k = frame_stack
        self._frames = np.zeros((self.frame_capacity, *self.frame_shape), self.observation_dtype)
        self._frame_owner = np.full(self.frame_capacity, -1, dtype=np.int64)
        self._next_frame_id = 0
        self._obs_ids = np.zeros((capacity, k), dtype=np.int64)
        self._next_ids = np.zeros((capacity, k), dtype=np.int64)
        self._actions = np.zeros(capacity, dtype=np.int64)
        self._returns = np.zeros(capacity, dtype=np.float32)
        self._discounts = np.zeros(capacity, dtype=np.float32)
        self._generation = np.zeros(capacity, dtype=np.int64)
        self._position = 0
        self._size = 0
        self.total_added = 0
        self._streams: dict[int, _Stream] = {}
        self._tree = SumTree(capacity) if prioritized else None
        self._max_priority = 1.0

    # -- size ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._size

    @property
    def size(self) -> int:
        """Transitions stored."""
        return self._size

    @property
    def max_priority(self) -> float:
        """The largest priority given so far (new transitions get it)."""
        return self._max_priority

    @property
    def current_n_step(self) -> int:
        """The n of the n-step return of the transitions written now."""
        if self.n_step_start is None:
            return self.n_step
        done = min(1.0, max(self.total_added, self._env_steps) / self.n_step_anneal)
        return max(1, round(self.n_step_start + (self.n_step - self.n_step_start) * done))

    def note_env_steps(self, steps: int) -> None:
        """The run's env steps so far, which the annealed n follows (a resumed run whose
        buffer was not saved goes on where its schedule was)."""
        self._env_steps = steps

    @property
    def open_streams(self) -> int:
        """Envs with an episode in progress."""
        return len(self._streams)

    @property
    def pending_count(self) -> int:
        """Steps waiting for their n-step return."""
        return sum(len(s.pending) for s in self._streams.values())

    # -- inserting ------------------------------------------------------------------------

    def add(self, transition: Transition) -> None:
        """Add one env step."""
        with self.lock:
            self._add(transition)

    def add_batch(self, transitions: list[Transition]) -> None:
        """Add env steps in order."""
        with self.lock:
            for transition in transitions:
                self._add(transition)

    def _add(self, t: Transition) -> None:
        stream = self._streams.get(t.env_id)
        if t.episode_start or stream is None:
            if stream is not None:
                self._finish(stream, terminal=False)
            stream = _Stream(self._write_observation(t.observation))
            self._streams[t.env_id] = stream
        newest = self._write_frame(self._last_frame(t.next_observation))
        next_ids = np.empty_like(stream.ids)
        next_ids[:-1] = stream.ids[1:]
        next_ids[-1] = newest
        stream.pending.append((stream.ids, int(t.action), float(t.reward)))
        stream.ids = next_ids
        if t.terminated or t.truncated:
            self._finish(stream, terminal=t.terminated)
            del self._streams[t.env_id]
        else:
            # More than one when n has just been annealed down: each keeps its own length.
            while len(stream.pending) >= self.current_n_step:
                self._emit(stream, terminal=False)

    def end_episodes(self) -> None:
        """Close every open episode as truncated (its envs restart): pending steps are
        emitted with returns bootstrapped from their last observation."""
        with self.lock:
            for stream in self._streams.values():
                self._finish(stream, terminal=False)
            self._streams.clear()

    def _finish(self, stream: _Stream, terminal: bool) -> None:
        while stream.pending:
            self._emit(stream, terminal)

    def _emit(self, stream: _Stream, terminal: bool) -> None:
        steps = len(stream.pending)
        obs_ids, action, _ = stream.pending[0]
        ret = 0.0
        for j, (_, _, reward) in enumerate(stream.pending):
            ret += self.gamma**j * reward
        discount = 0.0 if terminal else self.gamma**steps
        stream.pending.popleft()
        i = self._position
        self._obs_ids[i] = obs_ids
        self._next_ids[i] = stream.ids
        self._actions[i] = action
        self._returns[i] = ret
        self._discounts[i] = discount
        self._generation[i] += 1
        if self._tree is not None:
            self._tree.update([i], [self._max_priority**self.alpha])
        self._position = (i + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)
        self.total_added += 1

    def _last_frame(self, observation: npt.NDArray[Any]) -> npt.NDArray[Any]:
        obs = np.asarray(observation)
        if obs.shape != self.observation_shape:
            raise ValueError(
                f"observation shape {obs.shape} does not match the buffer's "
                f"{self.observation_shape}"
            )
        c = self.frame_shape[0]
        return obs[-c:] if self.frame_stack > 1 else obs

    def _write_observation(self, observation: npt.NDArray[Any]) -> IdArray:
        obs = np.asarray(observation)
        if obs.shape != self.observation_shape:
            raise ValueError(
                f"observation shape {obs.shape} does not match the buffer's "
                f"{self.observation_shape}"
            )
        k, c = self.frame_stack, self.frame_shape[0]
        ids = np.empty(k, dtype=np.int64)
        for j in range(k):
            frame = obs[j * c : (j + 1) * c] if k > 1 else obs
            if j > 0 and np.array_equal(frame, obs[(j - 1) * c : j * c]):
                ids[j] = ids[j - 1]  # a reset repeats its first frame: store it once
            else:
                ids[j] = self._write_frame(frame)
        return ids

    def _write_frame(self, frame: npt.NDArray[Any]) -> int:
        frame_id = self._next_frame_id
        slot = frame_id % self.frame_capacity
        self._frames[slot] = frame
        self._frame_owner[slot] = frame_id
        self._next_frame_id += 1
        return frame_id

    # -- sampling ---------------------------------------------------------------------------

    def _valid(self, indices: IdArray) -> npt.NDArray[np.bool_]:
        ids = np.concatenate([self._obs_ids[indices], self._next_ids[indices]], axis=1)
        owners = self._frame_owner[ids % self.frame_capacity]
        return np.all(owners == ids, axis=1)  # type: ignore[no-any-return]

    def sample(self, batch_size: int, rng: np.random.Generator, beta: float = 0.4) -> ReplayBatch:
        """Sample a batch: uniformly, or by priority with importance weights (exponent beta)."""
        with self.lock:
            if self._size == 0:
                raise ValueError("cannot sample from an empty replay buffer")
            if self._tree is None:
                indices = self._sample_uniform(batch_size, rng)
                weights = np.ones(batch_size, dtype=np.float32)
            else:
                indices = self._sample_prioritized(batch_size, rng)
                probabilities = self._tree.get(indices) / self._tree.total
                raw = (self._size * probabilities) ** (-beta)
                weights = (raw / raw.max()).astype(np.float32)
            return self._gather(indices, weights)

    def _sample_uniform(self, batch_size: int, rng: np.random.Generator) -> IdArray:
        indices = rng.integers(0, self._size, size=batch_size)
        for _ in range(32):
            bad = ~self._valid(indices)
            if not bad.any():
                return indices
            indices[bad] = rng.integers(0, self._size, size=int(bad.sum()))
        raise RuntimeError("replay buffer: too few valid transitions to sample")

    def _sample_prioritized(self, batch_size: int, rng: np.random.Generator) -> IdArray:
        assert self._tree is not None
        tree = self._tree
        for _ in range(32):
            total = tree.total
            if total <= 0:
                break
            # stratified: one draw from each of batch_size equal slices of the total
            values = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
            indices = tree.find(np.minimum(values, np.nextafter(total, 0)))
            bad = (indices >= self._size) | (tree.get(indices) <= 0)
            ok = ~bad
            ok[ok] = self._valid(indices[ok])
            stale = indices[~ok & ~bad]
            if stale.size:
                tree.update(stale, np.zeros(stale.size))  # frames overwritten: never again
            if ok.all():
                return indices
        raise RuntimeError("replay buffer: too few valid transitions to sample")

    def _gather(self, indices: IdArray, weights: npt.NDArray[np.float32]) -> ReplayBatch:
        batch = len(indices)
        slots_obs = self._obs_ids[indices] % self.frame_capacity
        slots_next = self._next_ids[indices] % self.frame_capacity
        shape = (batch, *self.observation_shape)
        return ReplayBatch(
            observations=self._frames[slots_obs].reshape(shape),
            actions=self._actions[indices].copy(),
            returns=self._returns[indices].copy(),
            discounts=self._discounts[indices].copy(),
            next_observations=self._frames[slots_next].reshape(shape),
            weights=weights,
            indices=indices.astype(np.int64),
            generations=self._generation[indices].copy(),
        )

    def update_priorities(
        self,
        indices: npt.ArrayLike,
        td_errors: npt.ArrayLike,
        generations: npt.ArrayLike | None = None,
    ) -> None:
        """Set priorities from TD errors; slots overwritten since sampling are left alone."""
        if self._tree is None:
            return
        idx = np.asarray(indices, dtype=np.int64)
        priorities = np.abs(np.asarray(td_errors, dtype=np.float64)) + self.priority_eps
        with self.lock:
            if generations is not None:
                same = self._generation[idx] == np.asarray(generations, dtype=np.int64)
                idx, priorities = idx[same], priorities[same]
            if idx.size == 0:
                return
            self._max_priority = max(self._max_priority, float(priorities.max()))
            self._tree.update(idx, priorities**self.alpha)

    def priorities(self) -> npt.NDArray[np.float64]:
        """The sampling priorities (priority ** alpha) of the stored transitions."""
        if self._tree is None:
            return np.ones(self._size)
        with self.lock:
            return self._tree.leaves(self._size)

    # -- contents and state ----------------------------------------------------------------------

    def transitions(self) -> dict[str, npt.NDArray[Any]]:
        """Every stored transition in slot order (observations rebuilt): for tests and tools."""
        with self.lock:
            indices = np.arange(self._size)
            batch = self._gather(indices, np.ones(self._size, dtype=np.float32))
            return {
                "observations": batch.observations,
                "actions": batch.actions,
                "returns": batch.returns,
                "discounts": batch.discounts,
                "next_observations": batch.next_observations,
            }

    def state_dict(self) -> dict[str, npt.NDArray[Any]]:
        """Arrays for `np.savez` (no pickle); restores exactly with `load_state_dict`."""
        with self.lock:
            frames = min(self._next_frame_id, self.frame_capacity)
            size = self._size
            meta = {
                "capacity": self.capacity,
                "observation_shape": list(self.observation_shape),
                "observation_dtype": self.observation_dtype.str,
                "frame_stack": self.frame_stack,
                "frame_capacity": self.frame_capacity,
                "n_step": self.n_step,
                "gamma": self.gamma,
                "prioritized": self.prioritized,
                "next_frame_id": self._next_frame_id,
                "position": self._position,
                "size": size,
                "total_added": self.total_added,
                "max_priority": self._max_priority,
                "streams": {
                    str(env_id): {
                        "ids": s.ids.tolist(),
                        "pending": [[ids.tolist(), a, r] for ids, a, r in s.pending],
                    }
                    for env_id, s in self._streams.items()
                },
            }
            state = {
                "meta": np.array(json.dumps(meta)),
                "frames": self._frames[:frames].copy(),
                "frame_owner": self._frame_owner[:frames].copy(),
                "obs_ids": self._obs_ids[:size].copy(),
                "next_ids": self._next_ids[:size].copy(),
                "actions": self._actions[:size].copy(),
                "returns": self._returns[:size].copy(),
                "discounts": self._discounts[:size].copy(),
                "generation": self._generation[:size].copy(),
            }
            if self._tree is not None:
                state["priorities"] = self._tree.leaves(size)
            return state

    def load_state_dict(self, state: dict[str, npt.NDArray[Any]]) -> None:
        """Restore contents saved by `state_dict` into a buffer of the same layout."""
        meta = json.loads(str(state["meta"]))
        expected = {
            "capacity": self.capacity,
            "observation_shape": list(self.observation_shape),
            "frame_stack": self.frame_stack,
            "frame_capacity": self.frame_capacity,
            "n_step": self.n_step,
            "prioritized": self.prioritized,
        }
        for key, value in expected.items():
            if meta[key] != value:
                raise ValueError(f"saved replay buffer has {key}={meta[key]!r}; this one {value!r}")
        with self.lock:
            frames, size = len(state["frames"]), int(meta["size"])
            self._frames[:frames] = state["frames"]
            self._frame_owner[:] = -1
            self._frame_owner[:frames] = state["frame_owner"]
            for name in ("obs_ids", "next_ids", "actions", "returns", "discounts", "generation"):
                target = getattr(self, f"_{name}")
                target[:] = 0
                target[:size] = state[name]
            self._next_frame_id = int(meta["next_frame_id"])
            self._position = int(meta["position"])
            self._size = size
            self.total_added = int(meta["total_added"])
            self._max_priority = float(meta["max_priority"])
            self._streams = {
                int(env_id): _Stream(
                    np.array(s["ids"], dtype=np.int64),
                    deque(
                        (np.array(ids, dtype=np.int64), int(a), float(r))
                        for ids, a, r in s["pending"]
                    ),
                )
                for env_id, s in meta["streams"].items()
            }
            if self._tree is not None:
                self._tree.set_leaves(state["priorities"])

    def clone_empty(self) -> ReplayBuffer:
        """A new empty buffer with the same settings."""
        return ReplayBuffer(
            self.capacity,
            self.observation_shape,
            observation_dtype=self.observation_dtype,
            frame_stack=self.frame_stack,
            n_step=self.n_step,
            gamma=self.gamma,
            prioritized=self.prioritized,
            alpha=self.alpha,
            priority_eps=self.priority_eps,
            frame_capacity=self.frame_capacity,
            n_step_start=self.n_step_start,
            n_step_anneal=self.n_step_anneal,
        )
