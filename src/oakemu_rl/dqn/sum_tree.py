"""SumTree: a binary tree of priorities with vectorised updates and prefix-sum search."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


class SumTree:
    """Leaves hold non-negative priorities; each inner node the sum of its children.

    `update` and `find` work on whole arrays of indices or values at once, one numpy
    operation per tree level.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        leaves = 1
        while leaves < capacity:
            leaves *= 2
        self._leaves = leaves
        self._depth = leaves.bit_length() - 1
        self._tree = np.zeros(2 * leaves, dtype=np.float64)

    @property
    def total(self) -> float:
        """The sum of all priorities."""
        return float(self._tree[1])

    def get(self, indices: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The priorities at `indices`."""
        return self._tree[np.asarray(indices, dtype=np.int64) + self._leaves]

    def update(self, indices: npt.ArrayLike, priorities: npt.ArrayLike) -> None:
        """Set priorities (for a repeated index the last value wins) and refresh the sums."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        values = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if idx.size == 0:
            return
        if np.any(values < 0) or not np.all(np.isfinite(values)):
            raise ValueError("priorities must be finite and non-negative")
        if np.any(idx < 0) or np.any(idx >= self.capacity):
            raise IndexError("sum-tree index out of range")
        positions = idx + self._leaves
        self._tree[positions] = values  # numpy assigns in order: the last duplicate wins
        nodes = np.unique(positions >> 1)
        for _ in range(self._depth):
            self._tree[nodes] = self._tree[2 * nodes] + self._tree[2 * nodes + 1]
            nodes = np.unique(nodes >> 1)

    def find(self, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """For each value v in [0, total), the leaf i with prefix(i) <= v < prefix(i + 1)."""
        v = np.array(values, dtype=np.float64, copy=True).reshape(-1)
        node = np.ones(v.shape, dtype=np.int64)
        tree = self._tree
        for _ in range(self._depth):
            left = 2 * node
            left_sum = tree[left]
            right = v >= left_sum
            v = np.where(right, v - left_sum, v)
            node = np.where(right, left + 1, left)
        return np.minimum(node - self._leaves, self.capacity - 1)

    def leaves(self, count: int | None = None) -> npt.NDArray[np.float64]:
        """A copy of the first `count` priorities (all by default)."""
        count = self.capacity if count is None else count
        return self._tree[self._leaves : self._leaves + count].copy()

    def set_leaves(self, priorities: npt.NDArray[Any]) -> None:
        """Replace the first len(priorities) leaves, zero the rest, and rebuild the sums."""
        self._tree[:] = 0.0
        self._tree[self._leaves : self._leaves + len(priorities)] = priorities
        for level in range(self._depth - 1, -1, -1):
            start = 1 << level
            nodes = np.arange(start, 2 * start)
            self._tree[nodes] = self._tree[2 * nodes] + self._tree[2 * nodes + 1]
