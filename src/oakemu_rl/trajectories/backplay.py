"""Backplay: training episodes that start along demonstrations, from late to early.

Each demonstration has a hand-over point: a step at which a training episode takes over
from the demonstration (its machine state there is restored, so the env has followed the
demonstration up to that step). The point starts at the last saved state before the
demonstration's end. Once the agent's episodes from the current point succeed often
enough (`threshold` of the last `window`), the point moves `stride` steps earlier, until
it reaches the game's start. An episode succeeds when it wins, or, for a demonstration
that did not win, when it collects at least the demonstration's return from that point.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from .demonstrations import DemonstrationSet

__all__ = ["Backplay", "HandOver"]


@dataclass(frozen=True)
class HandOver:
    """Where a backplay episode starts: step `step` of demonstration `demo_id`."""

    demo_id: int
    step: int
    state: bytes
    target_return: float
    """The demonstration's return from this step to its end."""
    demo_won: bool


class Backplay:
    """Hand-over points along a run's demonstrations, moved earlier as the agent succeeds.

    Args:
        demonstrations: the run's demonstrations (their saved states are the points).
        threshold: success rate from the current point at which it moves earlier.
        window: episodes from a point that decide its success rate.
    """

    def __init__(self, demonstrations: DemonstrationSet, threshold: float, window: int) -> None:
        if window < 1:
            raise ValueError(f"backplay window must be at least 1, got {window}")
        self.demonstrations = demonstrations
        self.threshold = threshold
        self.window = window
        self._points: list[int] = []  # per demo: index into its saved states
        self._outcomes: list[deque[bool]] = []
        self._returns_to_go: list[np.ndarray[Any, np.dtype[np.float64]]] = []
        for demo in demonstrations:
            states = demonstrations.states(demo.id)
            self._points.append(len(states) - 1)
            self._outcomes.append(deque(maxlen=window))
            self._returns_to_go.append(demo.trajectory.returns_to_go())
        self._lock = threading.Lock()
        self.moves = 0

    def point(self, demo_id: int) -> int:
        """The current hand-over step of a demonstration."""
        with self._lock:
            return self.demonstrations.states(demo_id).steps[self._points[demo_id]]

    @property
    def progress(self) -> float:
        """How far back the points have moved, on average: 0 at the start, 1 when every
        demonstration hands over at its first step."""
        with self._lock:
            fractions = []
            for demo in self.demonstrations:
                steps = self.demonstrations.states(demo.id).steps
                last = steps[-1]
                fractions.append(1.0 - steps[self._points[demo.id]] / last if last else 1.0)
            return float(np.mean(fractions)) if fractions else 0.0

    def sample(self, rng: np.random.Generator) -> HandOver:
        """A hand-over: a demonstration drawn uniformly, at its current point."""
        demo_id = int(rng.integers(len(self.demonstrations)))
        with self._lock:
            index = self._points[demo_id]
        states = self.demonstrations.states(demo_id)
        step = states.steps[index]
        demo = self.demonstrations[demo_id]
        return HandOver(
            demo_id,
            step,
            states.states[index],
            float(self._returns_to_go[demo_id][step]),
            demo.trajectory.won,
        )

    def report(self, hand_over: HandOver, *, won: bool, episode_return: float) -> bool:
        """How an episode from `hand_over` went; returns whether the point moved earlier."""
        success = won if hand_over.demo_won else episode_return >= hand_over.target_return - 1e-6
        states = self.demonstrations.states(hand_over.demo_id)
        with self._lock:
            index = self._points[hand_over.demo_id]
            if states.steps[index] != hand_over.step:
                return False  # the point has moved since this episode began
            outcomes = self._outcomes[hand_over.demo_id]
            outcomes.append(success)
            if index == 0 or len(outcomes) < self.window:
                return False
            if sum(outcomes) / len(outcomes) < self.threshold:
                return False
            self._points[hand_over.demo_id] = index - 1
            outcomes.clear()
            self.moves += 1
            return True

    def state_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "points": [
                    self.demonstrations.states(i).steps[p] for i, p in enumerate(self._points)
                ],
                "outcomes": [list(o) for o in self._outcomes],
                "moves": self.moves,
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the points (by step; demonstrations must be the same files)."""
        points = state.get("points", [])
        outcomes = state.get("outcomes", [])
        with self._lock:
            for i, step in enumerate(points[: len(self._points)]):
                steps = self.demonstrations.states(i).steps
                self._points[i] = max(0, int(np.searchsorted(steps, int(step), side="right")) - 1)
            for i, found in enumerate(outcomes[: len(self._outcomes)]):
                self._outcomes[i] = deque((bool(x) for x in found), maxlen=self.window)
            self.moves = int(state.get("moves", 0))
