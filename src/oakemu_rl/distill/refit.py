"""StudentRefit: a fresh student trained on the side, which replaces the acting one once
it does as well on held-out states (`distill.refit_every_updates`).

A network trained on a dataset that grows for hours loses the plasticity to fit it: on
forest_run's dataset a fresh network of the same architecture chooses safe actions more
often after 500 updates than the run's student after 11,000. A reset (shrink_perturb with
shrink 0) recovers that, but leaves a worse student acting and being evaluated until it
has caught up; a refit keeps the old student acting until the new one is as good.

With `distill.ema_decay` the student that acts is an average of the trained weights
(`WeightAverage`); a candidate then keeps an average of its own, which is what is judged
and swapped in.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from ..runtime.shrink_perturb import ShrinkPerturbSettings, shrink_and_perturb
from ..runtime.thread_safe_model import ThreadSafeModel
from ..runtime.weight_average import WeightAverage
from .ensemble import Student

__all__ = ["StudentRefit"]


@dataclass
class _Candidate:
    """A student in training on the side: `model` is what its optimizer trains, `acting`
    what would act if it were swapped in (`model` itself, or its `average`)."""

    model: Student
    optimizer: torch.optim.Optimizer
    acting: Student
    average: WeightAverage | None = None
    updates: int = 0

    def step(self) -> None:
        """The optimizer's step (gradients computed), and the average's."""
        self.optimizer.step()
        if self.average is not None:
            self.average.update(self.acting, self.model)


class StudentRefit:
    """Alternates two phases: the acting student trains for `every_updates` updates; then
    a candidate, freshly initialised (seeded by the run's seed and the update count, as
    `ShrinkPerturbSettings.seed`) with its own Adam, trains instead while the acting
    student stays as it is. `judge` compares the two on the same held-out states: the
    candidate's weights and optimizer state replace the student's once it scores at
    least as well, and it is dropped after `every_updates` updates without.

    Args:
        every_updates: updates of each phase (the most a candidate gets).
        student: the acting student's container (weights published to the actor).
        trained: the network the student's optimizer trains (the student itself, or the
            network it is the average of).
        optimizer: the student's Adam (the candidate's is a copy of its settings).
        run_seed: the run's seed.
        average: the student's `WeightAverage`, with `distill.ema_decay` (None: without).
    """

    def __init__(
        self,
        every_updates: int,
        student: ThreadSafeModel[Student],
        trained: Student,
        optimizer: torch.optim.Optimizer,
        run_seed: int,
        average: WeightAverage | None = None,
    ) -> None:
        self.every_updates = every_updates
        self.student = student
        self.trained = trained
        self.average = average
        self.optimizer = optimizer
        self.run_seed = run_seed
        self.candidate: _Candidate | None = None
        self.phase_start = 0
        self.swaps = 0
        self.dropped = 0

    def after_update(self, updates: int) -> None:
        """Count the candidate's update, or start one when the student's phase is over."""
        if self.candidate is not None:
            self.candidate.updates += 1
        elif updates - self.phase_start >= self.every_updates:
            model = copy.deepcopy(self.trained)
            shrink_and_perturb(model, 0.0, ShrinkPerturbSettings.seed(self.run_seed, updates))
            optimizer = self._optimizer_for(model)
            for group, current in zip(
                optimizer.param_groups, self.optimizer.param_groups, strict=True
            ):
                group["lr"] = current["lr"]  # the rollback's learning-rate scale
            self.candidate = self._candidate(model, optimizer)
            self.phase_start = updates

    def _candidate(self, model: Student, optimizer: torch.optim.Optimizer) -> _Candidate:
        if self.average is None:
            return _Candidate(model, optimizer, model)
        return _Candidate(model, optimizer, copy.deepcopy(model), WeightAverage(self.average.decay))

    def _optimizer_for(self, model: Student) -> torch.optim.Optimizer:
        """A fresh optimizer of the student's kind and settings over `model`."""
        return type(self.optimizer)(model.parameters(), **self.optimizer.defaults)

    def judge(self, student_score: float, candidate_score: float, updates: int) -> None:
        """Swap the candidate in when it scores at least as well as the student (the same
        measure on the same held-out states), drop it when its phase is over."""
        candidate = self.candidate
        if candidate is None:
            return
        if candidate_score >= student_score:
            with self.student.update():
                self.student.model.load_state_dict(candidate.acting.state_dict())
            if candidate.average is not None and self.average is not None:
                self.trained.load_state_dict(candidate.model.state_dict())
                self.average.restart(candidate.average.count)
            self.optimizer.load_state_dict(candidate.optimizer.state_dict())
            self.swaps += 1
        elif candidate.updates >= self.every_updates:
            self.dropped += 1
        else:
            return
        self.candidate = None
        self.phase_start = updates

    def set_learning_rate(self, learning_rate: float) -> None:
        """The rollback's learning rate, for a candidate in training too."""
        if self.candidate is not None:
            for group in self.candidate.optimizer.param_groups:
                group["lr"] = learning_rate

    def metrics(self) -> dict[str, float]:
        """``distill/refits`` (candidates swapped in) and ``distill/refits_dropped``."""
        return {"distill/refits": float(self.swaps), "distill/refits_dropped": float(self.dropped)}

    def state_dict(self) -> dict[str, Any]:
        """The phase, the counts and a candidate in training (weights, optimizer and
        average)."""
        candidate = self.candidate
        return {
            "phase_start": self.phase_start,
            "swaps": self.swaps,
            "dropped": self.dropped,
            "candidate": None
            if candidate is None
            else {
                "model": copy.deepcopy(candidate.model.state_dict()),
                "optimizer": copy.deepcopy(candidate.optimizer.state_dict()),
                "updates": candidate.updates,
                "average": None
                if candidate.average is None
                else {
                    "model": copy.deepcopy(candidate.acting.state_dict()),
                    "count": candidate.average.count,
                },
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        self.phase_start = int(state["phase_start"])
        self.swaps = int(state["swaps"])
        self.dropped = int(state["dropped"])
        saved = state["candidate"]
        if saved is None:
            self.candidate = None
            return
        model = copy.deepcopy(self.trained)
        model.load_state_dict(saved["model"])
        optimizer = self._optimizer_for(model)
        optimizer.load_state_dict(saved["optimizer"])
        candidate = self._candidate(model, optimizer)
        candidate.updates = int(saved["updates"])
        average = saved.get("average")
        if candidate.average is not None:
            if average is None:  # saved by a run without an average: it starts here
                candidate.acting.load_state_dict(saved["model"])
            else:
                candidate.acting.load_state_dict(average["model"])
                candidate.average.restart(int(average["count"]))
        self.candidate = candidate
