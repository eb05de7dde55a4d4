"""Automatic rollback: back to the best earlier checkpoint when training breaks down.

`RollbackController` watches for

- non-finite losses (`check_loss`) and non-finite weights (`check_weights`), and
- collapse of the tester's score (`observe_evaluation`): the mean of the last
  `collapse_window` evaluations falls below `floor + collapse_fraction * (best - floor)`,
  where `best` is the best evaluation so far and `floor` the random policy's score
  (or `collapse_floor`, or 0). Collapse is watched only once an evaluation has beaten
  `floor` beyond its noise: the low end of its 95% interval above it, when the
  evaluation gives one. A lucky evaluation a hair above random play is no level to
  collapse from.

A rollback restores the learner and its optimizer from the best earlier checkpoint
(the highest-scored one; the newest one when none is scored) through the state
adapter's `restore_for_rollback`, counts `total_rollbacks` (which the experiment keeps
in its checkpoints and logs as `train/total_rollbacks`) and can lower the learning
rate (`lr_factor`). It never loops: once `max_rollbacks_without_recovery` rollbacks
have happened with no recovery in between (a healthy evaluation, or
`recovery_updates` updates without a non-finite loss), the next trigger stops the
run with a message that says why.

It works for any algorithm: give it the run's `CheckpointManager` and a `restore`
function that puts a checkpoint's learner and optimizer back and applies a
learning-rate scale.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Literal, Protocol

import torch
from pydantic import BaseModel, ConfigDict, Field

from .checkpoints import Checkpoint, CheckpointError, CheckpointManager
from .metrics import MetricsSink, NullSink

__all__ = ["Restore", "RollbackController", "RollbackSettings", "TrainingMonitor"]


class RollbackSettings(BaseModel):
    """When and how to roll back automatically."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool = Field(True, description="Roll back automatically.")
    watch_non_finite: bool = Field(True, description="Roll back on a non-finite loss or weight.")
    watch_collapse: bool = Field(True, description="Roll back when the tester's score collapses.")
    metric: Literal["mean_return", "mean_score"] = Field(
        "mean_return", description="The evaluation figure that is watched for collapse."
    )
    collapse_fraction: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="Collapse: the windowed score is below floor + fraction x (best - floor).",
    )
    collapse_window: int = Field(
        2, ge=1, description="Evaluations averaged before comparing with the best."
    )
    collapse_floor: float | None = Field(
        None, description="The floor (None: the random policy's score when known, else 0)."
    )
    lr_factor: float = Field(
        0.5, gt=0, le=1, description="The learning rate is multiplied by this at each rollback."
    )
    max_rollbacks_without_recovery: int = Field(
        3, ge=1, description="Rollbacks in a row without recovery before the run is stopped."
    )
    recovery_updates: int = Field(
        500, ge=1, description="Updates without a non-finite loss that count as a recovery."
    )


Restore = Callable[[Checkpoint, float], int]
"""Restores the learner and optimizer of a checkpoint, applies a learning-rate scale and
returns the checkpoint's actor step."""


class TrainingMonitor(Protocol):
    """What a learner reports to (the rollback controller implements it)."""

    def check_loss(self, loss: float | torch.Tensor, step: int) -> bool: ...

    def check_weights(self, parameters: Iterable[torch.Tensor], step: int) -> bool: ...

    def note_healthy_updates(self, count: int = 1) -> None: ...


class RollbackController:
    """Watches training for breakdowns and rolls the learner back to an earlier checkpoint.

    Args:
        settings: when and how to roll back.
        checkpoints: the run's checkpoint manager (the rollback targets).
        restore: restores a checkpoint's learner and optimizer with a learning-rate scale
            (see `Restore`). It is called without the controller's lock held, so it may
            wait for the learner to finish an update even when that update is itself
            reporting a breakdown (that report is then ignored: a rollback is under way).
        metrics: where `train/total_rollbacks` and `rollback/*` scalars go.
        log: where messages go.
        on_give_up: called with a message when the run must stop.
    """

    def __init__(
        self,
        settings: RollbackSettings,
        checkpoints: CheckpointManager,
        restore: Restore,
        *,
        metrics: MetricsSink | None = None,
        log: Callable[[str], None] | None = None,
        on_give_up: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.checkpoints = checkpoints
        self._restore = restore
        self.metrics: MetricsSink = metrics or NullSink()
        self._log = log or (lambda text: None)
        self._on_give_up = on_give_up
        self._lock = threading.RLock()
        self._restoring = False
        self.total_rollbacks = 0
        self.rollbacks_without_recovery = 0
        self.lr_scale = 1.0
        self.best_score: float | None = None
        self.floor: float | None = settings.collapse_floor
        self.floor_beaten = False
        self._recent: deque[float] = deque(maxlen=settings.collapse_window)
        self._healthy_updates = 0
        self._last_kind = ""
        self.gave_up = False
        self.stop_reason: str | None = None
        self.history: list[dict[str, Any]] = []

    # -- watching -----------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether rollbacks are enabled and the controller has not given up."""
        return self.settings.enabled and not self.gave_up

    def set_baseline(self, score: float) -> None:
        """The random policy's score: the collapse floor unless `collapse_floor` is set."""
        if self.settings.collapse_floor is None and math.isfinite(score):
            self.floor = float(score)

    def collapse_threshold(self) -> float | None:
        """The windowed score below which training has collapsed (None: not watched yet)."""
        floor = self.floor if self.floor is not None else 0.0
        if self.best_score is None or self.best_score <= floor or not self.floor_beaten:
            return None
        return floor + self.settings.collapse_fraction * (self.best_score - floor)

    def check_loss(self, loss: float | torch.Tensor, step: int) -> bool:
        """Roll back if `loss` is not finite; True when a rollback (or a stop) happened."""
        value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
        if math.isfinite(value):
            self.note_healthy_updates(1)
            return False
        if not (self.active and self.settings.watch_non_finite):
            return False
        return self.trigger(f"non-finite loss ({value}) at step {step:,}", step, "non_finite")

    def check_weights(self, parameters: Iterable[torch.Tensor], step: int) -> bool:
        """Roll back if any weight is not finite; True when a rollback (or a stop) happened."""
        if weights_finite(parameters):
            return False
        if not (self.active and self.settings.watch_non_finite):
            return False
        return self.trigger(f"non-finite weights at step {step:,}", step, "non_finite")

    def note_healthy_updates(self, count: int = 1) -> None:
        """Count updates without a non-finite loss; enough of them are a recovery."""
        with self._lock:
            if self.rollbacks_without_recovery == 0:
                return
            self._healthy_updates += count
            # Updates only show recovery from a non-finite loss; a collapse needs an evaluation.
            if self._last_kind == "non_finite" and (
                self._healthy_updates >= self.settings.recovery_updates
            ):
                self._recovered("healthy updates")

    def observe_evaluation(self, score: float, step: int, lower: float | None = None) -> bool:
        """Record an evaluation's score and the low end of its 95% interval (`lower`; None:
        the score alone); roll back on collapse (True when one happened)."""
        if not math.isfinite(score):
            return False
        with self._lock:
            if self.best_score is None or score > self.best_score:
                self.best_score = float(score)
            evidence = score if lower is None or not math.isfinite(lower) else lower
            if evidence > (self.floor if self.floor is not None else 0.0):
                self.floor_beaten = True
            self._recent.append(float(score))
            threshold = self.collapse_threshold()
            window = self._recent
            mean = sum(window) / len(window)
            collapsed = threshold is not None and len(window) == window.maxlen and mean < threshold
            if not collapsed:
                if threshold is not None and score >= threshold:
                    self._recovered("healthy evaluation")
                return False
            if not (self.active and self.settings.watch_collapse):
                return False
            reason = (
                f"score collapse at step {step:,}: mean {self.settings.metric} {mean:.3g} over "
                f"the last {len(window)} evaluation(s) < {threshold:.3g} "
                f"({self.settings.collapse_fraction:g} of the way from {self.floor or 0:.3g} "
                f"to the best {self.best_score:.3g})"
            )
        return self.trigger(reason, step, "collapse")

    def _recovered(self, why: str) -> None:
        if self.rollbacks_without_recovery:
            self._log(f"rollback: recovered ({why})")
        self.rollbacks_without_recovery = 0
        self._healthy_updates = 0

    # -- rolling back -----------------------------------------------------------------------

    def trigger(self, reason: str, step: int, kind: str = "manual") -> bool:
        """Roll back for `reason`, or stop the run if rollbacks have not helped.

        Returns True when the learner was restored (or is being restored by another
        thread) or the run was told to stop.
        """
        with self._lock:
            if not self.settings.enabled or self.gave_up:
                return False
            if self._restoring:
                return True
            limit = self.settings.max_rollbacks_without_recovery
            if self.rollbacks_without_recovery >= limit:
                return self._give_up(
                    f"automatic rollback gave up: {reason}, after {limit} rollback(s) without "
                    "recovery; stopping the run (lower the learning rate, or raise "
                    "rollback.max_rollbacks_without_recovery)"
                )
            target = self._choose_checkpoint()
            if target is None:
                return self._give_up(
                    f"{reason}, and there is no valid checkpoint in {self.checkpoints.root} to "
                    "roll back to; stopping the run"
                )
            self._restoring = True
            lr_scale = self.lr_scale * self.settings.lr_factor
        try:
            restored_step = self._restore(target, lr_scale)
        finally:
            with self._lock:
                self._restoring = False
        with self._lock:
            self.total_rollbacks += 1
            self.rollbacks_without_recovery += 1
            self._last_kind = kind
            self._healthy_updates = 0
            self._recent.clear()
            self.lr_scale = lr_scale
            self.history.append(
                {
                    "step": int(step),
                    "reason": reason,
                    "kind": kind,
                    "checkpoint": target.path.name,
                    "checkpoint_step": int(restored_step),
                    "lr_scale": self.lr_scale,
                }
            )
        self.metrics.scalar("train/total_rollbacks", float(self.total_rollbacks), step)
        self.metrics.scalar("rollback/lr_scale", self.lr_scale, step)
        self.metrics.scalar("rollback/to_step", float(restored_step), step)
        self._log(
            f"rollback {self.total_rollbacks}: {reason}; restored learner and optimizer "
            f"from {target.path.name} (step {restored_step:,}"
            + (f", score {target.score:.3g}" if target.score is not None else "")
            + f"); learning-rate scale now {self.lr_scale:g}"
        )
        return True

    def _choose_checkpoint(self) -> Checkpoint | None:
        with contextlib.suppress(CheckpointError, OSError):
            best = self.checkpoints.best()
            if best is not None:
                return best
        with contextlib.suppress(CheckpointError, OSError):
            return self.checkpoints.latest()
        return None

    def _give_up(self, message: str) -> bool:
        self.gave_up = True
        self.stop_reason = message
        self._log(message)
        if self._on_give_up is not None:
            self._on_give_up(message)
        return True

    # -- state ------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (counts, learning-rate scale, best score, history)."""
        with self._lock:
            return {
                "total_rollbacks": self.total_rollbacks,
                "rollbacks_without_recovery": self.rollbacks_without_recovery,
                "lr_scale": self.lr_scale,
                "best_score": self.best_score,
                "floor": self.floor,
                "floor_beaten": self.floor_beaten,
                "recent": list(self._recent),
                "history": list(self.history),
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (missing keys keep their values)."""
        with self._lock:
            self.total_rollbacks = int(state.get("total_rollbacks", self.total_rollbacks))
            self.rollbacks_without_recovery = int(state.get("rollbacks_without_recovery", 0))
            self.lr_scale = float(state.get("lr_scale", self.lr_scale))
            best = state.get("best_score")
            self.best_score = None if best is None else float(best)
            floor = state.get("floor", self.floor)
            self.floor = None if floor is None else float(floor)
            self.floor_beaten = bool(state.get("floor_beaten", False))
            self._recent.clear()
            self._recent.extend(float(v) for v in state.get("recent", []))
            self.history = list(state.get("history", []))


def weights_finite(parameters: Iterable[torch.Tensor]) -> bool:
    """Whether every value of every tensor is finite."""
    with torch.no_grad():
        for tensor in parameters:
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                return False
    return True
