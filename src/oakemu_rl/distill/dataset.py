"""DistillDataset: the aggregated dataset of a distillation run (DAgger's D).

Every state the training envs reach is labelled by the teacher and kept here: its
observation (as the env gives it), the teacher's soft target, whether it came just before
a lost life (critical) and whether it is held out of training (to measure imitation on
states the student was not trained on).

The dataset is bounded in bytes: its arrays are sized once, from `max_bytes`, and when
they are full the oldest state makes room for the newest (first in, first out). DAgger
keeps every round's data; a bound has to drop some, and dropping the oldest keeps the
states that recent students visit, which are the ones the student must get right, while
the earliest, labelled along the teacher's own play under a high beta, go first. A
reservoir sample would keep a share of those forever and would drop freshly marked
critical states at random.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["DistillBatch", "DistillDataset", "rules_out"]

_TARGET_DTYPE = np.dtype(np.float32)


def rules_out(targets: npt.NDArray[np.float32]) -> npt.NDArray[np.bool_]:
    """Whether each target (the last axis) gives some action no mass: a decision state."""
    ruled_out: npt.NDArray[np.bool_] = np.asarray((targets <= 0).any(axis=-1))
    return ruled_out


@dataclass(frozen=True)
class DistillBatch:
    """Labelled states drawn from the dataset (copies)."""

    observations: npt.NDArray[Any]
    targets: npt.NDArray[np.float32]
    critical: npt.NDArray[np.bool_]


class DistillDataset:
    """Observations with the teacher's soft targets, critical and holdout flags, bounded in
    bytes, oldest out first; sampled with critical states weighted up (and with
    `decisions_only`, only the states whose target rules some action out).

    With `binary`, observations are stored bit-packed (a value is 0 or 255) and unpacked
    when drawn: `sample`, `holdout` and `state_dict` give them back as added.

    The actor adds (`add`, `mark_critical`); the learner samples (`sample`, `holdout`) on
    its own thread: a lock keeps them apart. Each state added gets an id (0, 1, 2, ...);
    `mark_critical` takes ids, and ignores those already evicted.

    Args:
        max_bytes: the most memory the dataset's arrays take (`nbytes` never exceeds it).
        observation_shape: the shape of one observation.
        observation_dtype: its dtype (as the env gives it: uint8 for OakEmu games).
        num_actions: the length of a soft target.
        critical_weight: a critical state is drawn this many times as often as another.
        binary: every observation value is 0 or 255 (uint8): stored one bit each; `add`
            refuses an observation with any other value.
        decisions_only: `sample` draws only states whose target gives some action no mass
            (the safe-set loss learns nothing from a state where every action is allowed).

    Raises:
        ValueError: `max_bytes` does not hold one state, or `critical_weight` is below 1,
            or `binary` with an observation dtype other than uint8.
    """

    def __init__(
        self,
        max_bytes: int,
        observation_shape: tuple[int, ...],
        observation_dtype: Any,
        num_actions: int,
        *,
        critical_weight: float = 1.0,
        binary: bool = False,
        decisions_only: bool = False,
    ) -> None:
        dtype = np.dtype(observation_dtype)
        if binary and dtype != np.uint8:
            raise ValueError(f"a binary dataset stores uint8 observations, not {dtype}")
        self.observation_shape = tuple(int(s) for s in observation_shape)
        self.observation_dtype = dtype
        self.num_actions = int(num_actions)
        self.binary = bool(binary)
        self._values = int(math.prod(self.observation_shape))
        stored_shape = ((self._values + 7) // 8,) if binary else self.observation_shape
        self.entry_bytes: int = (
            int(math.prod(stored_shape)) * dtype.itemsize
            + self.num_actions * _TARGET_DTYPE.itemsize
            + 2  # the critical and holdout flags
        )
        capacity: int = int(max_bytes) // self.entry_bytes
        if capacity < 1:
            raise ValueError(
                f"a dataset of {max_bytes:,} bytes holds no state of {self.entry_bytes:,} "
                "bytes (an observation, a soft target and two flags)"
            )
        if not critical_weight >= 1.0:
            raise ValueError(f"critical_weight must be at least 1, got {critical_weight}")
        self.max_bytes = int(max_bytes)
        self.capacity = capacity
        self.critical_weight = float(critical_weight)
        self.decisions_only = bool(decisions_only)
        self._stored = np.zeros((capacity, *stored_shape), dtype=dtype)
        self.targets = np.zeros((capacity, self.num_actions), dtype=_TARGET_DTYPE)
        self.critical = np.zeros(capacity, dtype=bool)
        self.held_out = np.zeros(capacity, dtype=bool)
        self._size = 0
        self._added = 0
        self._holdouts = 0
        self._criticals = 0  # critical states that are trained on
        self._decisions = 0  # states trained on whose target rules some action out
        self._lock = threading.Lock()

    # -- sizes ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        """Bytes the stored states take (at most `max_bytes`)."""
        return self._size * self.entry_bytes

    @property
    def added(self) -> int:
        """States added so far (the next state's id)."""
        return self._added

    @property
    def trainable(self) -> int:
        """Stored states that are trained on (not held out)."""
        return self._size - self._holdouts

    @property
    def holdouts(self) -> int:
        """Stored states held out of training."""
        return self._holdouts

    @property
    def criticals(self) -> int:
        """Stored critical states that are trained on."""
        return self._criticals

    @property
    def decisions(self) -> int:
        """Stored states trained on whose target gives some action no mass."""
        return self._decisions

    # -- observations as stored ---------------------------------------------------------

    def _pack(self, observations: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Observations (n, *shape) as stored: bit-packed rows when binary."""
        if not self.binary:
            return observations
        flat = observations.reshape(len(observations), self._values)
        bits = flat != 0
        if not np.array_equal(flat, bits.view(np.uint8) * np.uint8(255)):
            found = np.unique(flat[(flat != 0) & (flat != 255)])[:5].tolist()
            raise ValueError(
                f"a binary dataset stores observations of 0s and 255s; got values {found}"
            )
        packed: npt.NDArray[Any] = np.packbits(bits, axis=1)
        return packed

    def _unpack(self, stored: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Stored rows back as observations (n, *shape)."""
        if not self.binary:
            return stored
        return self._from_bits(stored)

    def _from_bits(self, packed: npt.NDArray[Any]) -> npt.NDArray[Any]:
        bits = np.unpackbits(packed, axis=1, count=self._values)
        bits *= np.uint8(255)
        return bits.reshape(len(packed), *self.observation_shape)

    # -- adding ---------------------------------------------------------------------------

    def _slot(self, entry_id: int) -> int | None:
        """Where state `entry_id` is stored, or None once it has been evicted."""
        if self._added - self._size <= entry_id < self._added:
            return entry_id % self.capacity
        return None

    def add(
        self, observation: npt.ArrayLike, target: npt.ArrayLike, *, holdout: bool = False
    ) -> int:
        """Keep a labelled state (evicting the oldest when full); returns its id."""
        target_row = np.asarray(target, dtype=_TARGET_DTYPE)
        if target_row.shape != (self.num_actions,):
            raise ValueError(
                f"a soft target has {self.num_actions} entries; got shape {target_row.shape}"
            )
        row = np.asarray(observation, dtype=self.observation_dtype)
        if row.shape != self.observation_shape:
            raise ValueError(
                f"an observation has shape {self.observation_shape}; got shape {row.shape}"
            )
        stored = self._pack(row[None])[0]
        with self._lock:
            entry_id = self._added
            slot = entry_id % self.capacity
            if self._size == self.capacity:  # the oldest state is at this slot
                self._forget(slot)
            else:
                self._size += 1
            self._stored[slot] = stored
            self.targets[slot] = target_row
            self.critical[slot] = False
            self.held_out[slot] = holdout
            self._holdouts += int(holdout)
            self._decisions += int(not holdout and bool(rules_out(target_row)))
            self._added += 1
        return entry_id

    def _forget(self, slot: int) -> None:
        if self.held_out[slot]:
            self._holdouts -= 1
            return
        self._criticals -= int(self.critical[slot])
        self._decisions -= int(bool(rules_out(self.targets[slot])))

    def mark_critical(self, entry_ids: Iterable[int]) -> int:
        """Mark the stored states among `entry_ids` critical; returns how many were newly
        marked (a held-out state is marked too, and is still never drawn)."""
        marked = 0
        with self._lock:
            for entry_id in entry_ids:
                slot = self._slot(entry_id)
                if slot is None or self.critical[slot]:
                    continue
                self.critical[slot] = True
                if not self.held_out[slot]:
                    self._criticals += 1
                marked += 1
        return marked

    # -- sampling -------------------------------------------------------------------------

    def sample(self, batch_size: int, rng: np.random.Generator) -> DistillBatch | None:
        """`batch_size` trained-on states drawn with replacement, a critical one
        `critical_weight` times as likely as another (with `decisions_only`, none whose
        target allows every action); None while there is none.

        Rejection sampling: a uniformly drawn stored state is kept with probability
        weight / the largest weight (0 for held-out states), so the cost does not grow
        with the dataset's size.
        """
        with self._lock:
            if (self._decisions if self.decisions_only else self.trainable) == 0:
                return None
            top = max(1.0, self.critical_weight)
            chosen: list[npt.NDArray[np.int64]] = []
            needed = batch_size
            while needed > 0:
                draw = rng.integers(0, self._size, size=max(2 * needed, 32))
                weights = np.where(self.critical[draw], self.critical_weight, 1.0)
                weights[self.held_out[draw]] = 0.0
                if self.decisions_only:
                    weights[~rules_out(self.targets[draw])] = 0.0
                kept = draw[rng.random(draw.size) * top < weights][:needed]
                chosen.append(kept)
                needed -= kept.size
            rows = np.concatenate(chosen)
            return DistillBatch(
                self._unpack(self._stored[rows]), self.targets[rows], self.critical[rows].copy()
            )

    def holdout(
        self, limit: int, rng: np.random.Generator
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.float32]] | None:
        """Up to `limit` held-out states (a random choice when there are more) with their
        targets; None while there is none."""
        with self._lock:
            rows = np.flatnonzero(self.held_out[: self._size])
            if rows.size == 0:
                return None
            if rows.size > limit:
                rows = rng.choice(rows, size=limit, replace=False)
            return self._unpack(self._stored[rows]), self.targets[rows]

    # -- checkpoints ----------------------------------------------------------------------

    def _ordered_slots(self) -> npt.NDArray[np.int64]:
        """The slots of the stored states, oldest first."""
        first = self._added - self._size
        slots: npt.NDArray[np.int64] = np.arange(first, self._added, dtype=np.int64) % self.capacity
        return slots

    def state_dict(self) -> dict[str, npt.NDArray[Any]]:
        """The stored states, oldest first, and the count of states ever added: arrays
        only, for a checkpoint's `.npz` file. A binary dataset saves its observations
        bit-packed, as `observation_bits`."""
        with self._lock:
            slots = self._ordered_slots()
            key = "observation_bits" if self.binary else "observations"
            return {
                key: self._stored[slots],
                "targets": self.targets[slots],
                "critical": self.critical[slots],
                "held_out": self.held_out[slots],
                "added": np.array(self._added, dtype=np.int64),
            }

    def load_state_dict(self, state: dict[str, npt.NDArray[Any]]) -> None:
        """Replace the contents with what `state_dict` returned (the newest states only,
        when it holds more than this dataset's capacity). Packed and unpacked saves load
        into either kind of dataset."""
        targets = np.asarray(state["targets"])
        critical = np.asarray(state["critical"], dtype=bool)
        held_out = np.asarray(state["held_out"], dtype=bool)
        added = int(state["added"])
        count = len(targets)
        if "observation_bits" in state:
            bits = np.asarray(state["observation_bits"], dtype=np.uint8)
            if bits.shape[1:] != ((self._values + 7) // 8,):
                raise ValueError(
                    f"the saved dataset's packed observations have {bits.shape[1:]} bytes a "
                    f"state; this run's observations {self.observation_shape} pack into "
                    f"{(self._values + 7) // 8}"
                )
            # Unpacked only for a dataset that stores them unpacked.
            saved: npt.NDArray[Any] = bits if self.binary else self._from_bits(bits)
        else:
            observations = np.asarray(state["observations"])
            if observations.shape[1:] != self.observation_shape:
                raise ValueError(
                    f"the saved dataset's observations have shape {observations.shape[1:]}; "
                    f"this run's have {self.observation_shape}"
                )
            saved = self._pack(observations)
        if targets.shape != (count, self.num_actions):
            raise ValueError(
                f"the saved dataset's targets have shape {targets.shape}; expected "
                f"({count}, {self.num_actions})"
            )
        if not (len(saved) == len(critical) == len(held_out) == count <= added):
            raise ValueError("the saved dataset's arrays disagree in length")
        keep = min(count, self.capacity)
        ids = np.arange(added - keep, added, dtype=np.int64)
        slots = ids % self.capacity
        with self._lock:
            self.critical[:] = False
            self.held_out[:] = False
            self._stored[slots] = saved[count - keep :]
            self.targets[slots] = targets[count - keep :]
            self.critical[slots] = critical[count - keep :]
            self.held_out[slots] = held_out[count - keep :]
            self._size = keep
            self._added = added
            self._holdouts = int(self.held_out[slots].sum())
            self._criticals = int((self.critical[slots] & ~self.held_out[slots]).sum())
            ruled_out = rules_out(self.targets[slots])
            self._decisions = int((ruled_out & ~self.held_out[slots]).sum())
