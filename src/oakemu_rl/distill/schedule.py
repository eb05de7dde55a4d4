"""BetaSchedule: who acts in a distillation run, the teacher or the student."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BetaSchedule"]


@dataclass(frozen=True)
class BetaSchedule:
    """The chance that the teacher acts at an env step, going linearly from `start` to
    `end` and staying at `end` after (DAgger's beta: the student plays more and more of
    each episode, so the states labelled are more and more its own).

    It decays over `decay_steps` env steps, or, with `decay_steps` None, over the run's
    budget: `budget_used` maps an env step to the share of the budget spent by then (0 to
    1), so that a run budgeted in minutes hands the play to the student within them.
    """

    start: float
    end: float
    decay_steps: int | None
    budget_used: Callable[[int], float] | None = None

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"beta {name} must be in [0, 1], got {value}")
        if self.decay_steps is None:
            if self.budget_used is None:
                raise ValueError(
                    "beta decay_steps None decays over the run's budget: give budget_used"
                )
        elif self.decay_steps < 1:
            raise ValueError(f"beta decay_steps must be at least 1, got {self.decay_steps}")

    def __call__(self, step: int) -> float:
        """The chance that the teacher acts at env step `step`."""
        if self.decay_steps is None:
            assert self.budget_used is not None  # checked in __post_init__
            done = min(1.0, max(0.0, self.budget_used(step)))
        else:
            done = min(1.0, max(0, step) / self.decay_steps)
        return self.start + (self.end - self.start) * done
