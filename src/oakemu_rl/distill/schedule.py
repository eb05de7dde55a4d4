"""BetaSchedule: who acts in a distillation run, the teacher or the student."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BetaSchedule"]


@dataclass(frozen=True)
class BetaSchedule:
    """The chance that the teacher acts at an env step, going linearly from `start` to
    `end` over `decay_steps` steps and staying at `end` after (DAgger's beta: the
    student plays more and more of each episode, so the states labelled are more and
    more its own).
    """

    start: float
    end: float
    decay_steps: int

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"beta {name} must be in [0, 1], got {value}")
        if self.decay_steps < 1:
            raise ValueError(f"beta decay_steps must be at least 1, got {self.decay_steps}")

    def __call__(self, step: int) -> float:
        """The chance that the teacher acts at env step `step`."""
        done = min(1.0, max(0, step) / self.decay_steps)
        return self.start + (self.end - self.start) * done
