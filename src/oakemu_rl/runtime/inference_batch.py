"""InferenceBatch: observations gathered for one batched forward pass."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

E = TypeVar("E")


class InferenceBatch(Generic[E]):
    """The observations waiting for one batched forward pass, each with what it is for.

    `add` copies an observation into the next free row; `take` returns the filled rows
    and their entries and empties the batch. Rows are reused from batch to batch.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._observations: npt.NDArray[Any] | None = None
        self._entries: list[E] = []

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, entry: E, observation: npt.NDArray[Any]) -> None:
        """Queue `observation` for the next pass; `entry` comes back with it from `take`."""
        rows = self._observations
        if rows is None or rows.shape[1:] != observation.shape or rows.dtype != observation.dtype:
            rows = np.empty((self.capacity, *observation.shape), dtype=observation.dtype)
            self._observations = rows
        rows[len(self._entries)] = observation
        self._entries.append(entry)

    def take(self) -> tuple[npt.NDArray[Any], list[E]]:
        """The queued observations (a view, valid until the next `add`) and their entries."""
        entries, self._entries = self._entries, []
        if self._observations is None:
            return np.empty((0,)), entries
        return self._observations[: len(entries)], entries
