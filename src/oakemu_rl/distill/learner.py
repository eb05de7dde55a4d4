"""The distillation learner thread: soft cross-entropy on minibatches of the aggregated
dataset, at a fixed ratio of updates to labelled states (with `shrink_perturb`, the student
shrunk towards a fresh initialisation every so many updates; with `refit_every_updates`, a
fresh student refitted on the side, `StudentRefit`; with `ema_decay`, the student that
acts an average of the trained weights, `WeightAverage`; with `members`, an ensemble of
students each trained on minibatches of its own, `StudentEnsemble`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..runtime.context import RuntimeContext
from ..runtime.learner_thread import LearnerThread
from ..runtime.replay_ratio_gate import ReplayRatioGate
from ..runtime.shrink_perturb import shrink_if_due
from ..runtime.thread_safe_model import ThreadSafeModel
from ..runtime.weight_average import WeightAverage
from .actor import safe_choice_rate, teacher_agrees
from .config import DistillExperimentConfiguration
from .dataset import DistillDataset
from .ensemble import Student, StudentEnsemble
from .loss import LOSSES
from .refit import StudentRefit

if TYPE_CHECKING:
    from ..runtime.rollback import TrainingMonitor

__all__ = ["DistillLearner", "NonFiniteDistillLossError"]

#: Held-out states the student is scored on at each measurement (a random choice of them).
HOLDOUT_SAMPLE = 4096


class NonFiniteDistillLossError(FloatingPointError):
    """A loss was NaN or infinite and no rollback could handle it."""


class DistillLearner(LearnerThread):
    """Trains the student on the aggregated dataset on its own thread.

    Consumes minibatches of labelled states (`DistillDataset.sample`, critical states
    weighted up); produces weights, published through the ThreadSafeModel after each
    update, and scalars: ``distill/loss`` (the mean of `distill.loss` since the last
    log; also as ``train/loss``), ``distill/holdout_accuracy`` and
    ``distill/holdout_safe`` (`holdout_scores`), ``train/updates``,
    ``train/learning_rate`` and ``perf/updates_per_s``, every `distill.eval_every_updates`
    updates. With `distill.refit_every_updates`, a candidate student is refitted on the
    side (`StudentRefit`) and judged at each measurement on the same held-out states:
    ``distill/candidate_holdout_safe`` (or ``_accuracy``), ``distill/refits`` and
    ``distill/refits_dropped``. With `distill.ema_decay` the optimizer trains
    `trained_model` and each update moves the published student (the learner model) towards
    it (`WeightAverage`): what acts, is measured, checkpointed and exported is the average.

    Pacing (the `ReplayRatioGate` shared with the actor, counting labelled states): after
    `distill.learning_starts` labelled states, the learner makes `distill.updates_per_step`
    updates per labelled state; it waits while it is ahead, so that it does not train
    over and over on a small dataset, and the actor waits while it is more than
    `distill.max_lag_updates` behind, so that fast workers do not turn the setting into
    fewer updates than asked for.

    Args:
        context: the run's context.
        learner_model: the learner model's container (weights published to the actor).
        trained_model: the network the optimizer trains: the learner model itself, or with
            `distill.ema_decay` the network whose average it is.
        optimizer: Adam over the trained model's parameters.
        dataset: the aggregated dataset.
        gate: paces updates to labelled states, shared with the actor.
        env_steps: the actor's step count (for logging and rollback).
        monitor: watches losses and weights for rollback (optional).
    """

    def __init__(
        self,
        context: RuntimeContext[DistillExperimentConfiguration],
        learner_model: ThreadSafeModel[Student],
        trained_model: Student,
        optimizer: torch.optim.Optimizer,
        dataset: DistillDataset,
        gate: ReplayRatioGate,
        env_steps: Callable[[], int],
        *,
        monitor: TrainingMonitor | None = None,
    ) -> None:
        super().__init__()
        self.context = context
        self.settings = context.config.distill
        self._loss = LOSSES[self.settings.loss]
        self.learner_model = learner_model
        self.model = learner_model.model
        self.trained_model = trained_model
        decay = self.settings.ema_decay
        self.average = None if decay is None else WeightAverage(decay)
        if (self.average is None) != (trained_model is self.model):
            raise ValueError(
                "DistillLearner: the trained model is the learner model exactly when "
                "distill.ema_decay is not set"
            )
        self._params = [p for p in trained_model.parameters() if p.requires_grad]
        self.optimizer = optimizer
        self.dataset = dataset
        self.gate = gate
        self._env_steps = env_steps
        self.monitor = monitor
        self.rng = context.spawn_rng("distill_learner")
        self.updates = 0
        self.lr_scale = 1.0
        self.last_metrics: dict[str, float] = {}
        self._losses: list[torch.Tensor] = []
        self._hold = threading.RLock()
        self._rate_mark = (time.monotonic(), 0)
        every = self.settings.refit_every_updates
        self.refit = (
            None
            if every is None
            else StudentRefit(
                every, learner_model, trained_model, optimizer, context.seed, self.average
            )
        )

    # -- learning rate --------------------------------------------------------------------

    def set_lr_scale(self, scale: float) -> None:
        """Scale the learning rate from now on (the rollback controller lowers it)."""
        self.lr_scale = float(scale)
        for group in self.optimizer.param_groups:
            group["lr"] = self.settings.learning_rate * self.lr_scale
        if self.refit is not None:
            self.refit.set_learning_rate(self.settings.learning_rate * self.lr_scale)

    # -- one update -----------------------------------------------------------------------

    def update(self) -> torch.Tensor | None:
        """One Adam step on a minibatch; returns the loss (None while the dataset has no
        state to train on, or when a non-finite loss was handed to the rollback)."""
        # During a refit the candidate trains; the acting student stays as it is.
        candidate = self.refit.candidate if self.refit is not None else None
        model = self.trained_model if candidate is None else candidate.model
        params = self._params if candidate is None else list(model.parameters())
        # One minibatch for each member of an ensemble, so that their errors differ.
        students = list(model.members) if isinstance(model, StudentEnsemble) else [model]
        batch = self.dataset.sample(self.settings.batch_size * len(students), self.rng)
        if batch is None:
            # Nothing to learn from yet (the safe-set loss's states where every action is
            # allowed teach nothing): no update falls due until more states come, so the
            # actor is not held back waiting for one.
            self.gate.rebase(self.updates, self.gate.env_steps)
            return None
        device = self.context.device
        observations = torch.from_numpy(batch.observations).to(device)
        targets = torch.from_numpy(batch.targets).to(device)
        members = len(students)
        losses = [
            self._loss(student(x), y)
            for student, x, y in zip(
                students, observations.chunk(members), targets.chunk(members), strict=True
            )
        ]
        loss = torch.stack(losses).sum()
        if not bool(torch.isfinite(loss)):
            self._non_finite(loss)
            return None
        for param in params:  # what optimizer.zero_grad(set_to_none=True) does
            param.grad = None
        loss.backward()  # type: ignore[no-untyped-call]
        for student in students:  # each member's gradient clipped as if it trained alone
            grad_norm = nn.utils.clip_grad_norm_(
                list(student.parameters()), self.settings.max_grad_norm
            )
            if not bool(torch.isfinite(grad_norm)):
                self._non_finite(grad_norm)
                return None
        if candidate is not None:
            candidate.step()
        elif self.average is None:
            with self.learner_model.update():
                self.optimizer.step()
        else:
            self.optimizer.step()
            with self.learner_model.update():
                self.average.update(self.model, self.trained_model)
        self.updates += 1
        if self.refit is not None:
            self.refit.after_update(self.updates)
        shrink_if_due(
            self.settings.shrink_perturb, self.learner_model, self.updates, self.context.seed
        )
        if self.monitor is not None:
            self.monitor.note_healthy_updates(1)
        return loss.detach() / members  # the members' mean loss

    def _non_finite(self, value: torch.Tensor) -> None:
        """Hand a non-finite loss to the rollback (which restores an earlier checkpoint);
        without one, fail."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.refit is not None and self.refit.candidate is not None:
            self.refit.candidate.optimizer.zero_grad(set_to_none=True)
        step = self._env_steps()
        if self.monitor is not None and self.monitor.check_loss(value, step):
            return
        raise NonFiniteDistillLossError(
            f"non-finite distillation loss ({float(value.detach())}) at step {step:,} and no "
            "rollback to recover from it (enable rollback and checkpoints)"
        )

    @torch.no_grad()
    def holdout_scores(self) -> dict[str, float]:
        """The student's most likely action on held-out states (a random choice of up to
        `HOLDOUT_SAMPLE`): ``distill/holdout_accuracy``, the share on which it is one the
        teacher rates best, and ``distill/holdout_safe``, the share on which it loses no
        life where another action would (`safe_choice_rate`); empty without any.

        During a refit the candidate is scored on the same states
        (``distill/candidate_holdout_*``)."""
        held = self.dataset.holdout(HOLDOUT_SAMPLE, self.rng)
        if held is None:
            return {}
        observations, targets = held
        batch = torch.from_numpy(observations).to(self.context.device)
        scores = _scores(self.model, batch, targets, "distill/holdout")
        refit = self.refit
        if refit is not None and refit.candidate is not None:
            scores |= _scores(refit.candidate.acting, batch, targets, "distill/candidate_holdout")
        return scores

    # -- thread ---------------------------------------------------------------------------

    def _before_start(self) -> None:
        """Before the learner thread starts: hold the actor to the update ratio."""
        self.gate.hold_actor(True)

    def _run(self) -> None:
        stop = self.context.stop_event
        self.context.enter_thread()
        try:
            while not stop.is_set():
                if not self.gate.learner_wait(stop):
                    continue
                with self._hold:
                    loss = self.update()
                if loss is None:
                    time.sleep(0.01)
                    continue
                self.gate.record_update()
                self._losses.append(loss)
                if self.updates % self.settings.eval_every_updates == 0:
                    self._log()
        except BaseException as exc:
            self.context.report_error(exc)
        finally:
            self.gate.hold_actor(False)

    def _log(self) -> None:
        now, (mark_time, mark_updates) = time.monotonic(), self._rate_mark
        self._rate_mark = (now, self.updates)
        step = self._env_steps()
        loss = float(torch.stack(self._losses).mean()) if self._losses else 0.0
        metrics = {
            "distill/loss": loss,
            "train/loss": loss,  # the learner's loss of every algorithm (`oakemu-rl plot`)
            "train/updates": float(self.updates),
            "train/learning_rate": float(self.optimizer.param_groups[0]["lr"]),
            "perf/updates_per_s": (self.updates - mark_updates) / max(1e-9, now - mark_time),
        }
        shrinks = self.settings.shrink_perturb.count(self.updates)
        if shrinks is not None:
            metrics["train/shrink_perturbs"] = float(shrinks)
        self._losses.clear()
        with self._hold:
            metrics.update(self.holdout_scores())
            if self.refit is not None:
                self._judge_refit(metrics)
                metrics.update(self.refit.metrics())
        self.last_metrics = metrics
        for name, value in metrics.items():
            self.context.metrics.scalar(name, value, step)

    def _judge_refit(self, scores: dict[str, float]) -> None:
        """Judge a candidate in training against the acting student on the held-out scores
        just measured: the safe share, or the accuracy where no held-out state is critical."""
        if self.refit is None or "distill/candidate_holdout_accuracy" not in scores:
            return
        measure = "safe" if "distill/holdout_safe" in scores else "accuracy"
        self.refit.judge(
            scores[f"distill/holdout_{measure}"],
            scores[f"distill/candidate_holdout_{measure}"],
            self.updates,
        )

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Keep the learner between updates while the block runs (checkpoints, rollbacks)."""
        with self._hold:
            yield

    # -- state ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Counters, learning-rate scale and sampling RNG; with `ema_decay` the trained
        weights and the average's update count (the student, which is the average, and the
        optimizer are saved apart, the dataset by the state adapter)."""
        state: dict[str, Any] = {
            "updates": self.updates,
            "lr_scale": self.lr_scale,
            "rng": dict(self.rng.bit_generator.state),
        }
        if self.average is not None:
            state["trained_model"] = {
                name: tensor.detach().clone()
                for name, tensor in self.trained_model.state_dict().items()
            }
            state["average_count"] = self.average.count
        if self.refit is not None:
            state["refit"] = self.refit.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any], *, keep_counters: bool = False) -> None:
        """Restore what `state_dict` returned; with `keep_counters` (a rollback) the update
        count goes on from where it is."""
        if not keep_counters:
            self.updates = int(state["updates"])
        self.rng.bit_generator.state = state["rng"]
        if self.average is not None:
            self._restore_trained(state)
        if self.refit is not None and "refit" in state:
            self.refit.load_state_dict(state["refit"])
        self.set_lr_scale(float(state.get("lr_scale", 1.0)))
        self.gate.set_updates(self.updates)

    def _restore_trained(self, state: dict[str, Any]) -> None:
        """The trained weights and the average's count of `state`; a checkpoint of a run
        without an average (the student alone) restarts the average at the student."""
        assert self.average is not None
        trained = state.get("trained_model")
        if trained is None:
            self.trained_model.load_state_dict(self.model.state_dict())
            self.average.restart()
        else:
            self.trained_model.load_state_dict(trained)
            self.average.restart(int(state["average_count"]))


@torch.no_grad()
def _scores(
    model: Student, observations: torch.Tensor, targets: Any, prefix: str
) -> dict[str, float]:
    """``{prefix}_accuracy`` and (where a held-out state is critical) ``{prefix}_safe`` of
    `model`'s most likely actions on `observations`."""
    actions = model.greedy_actions(observations).cpu().numpy()
    scores = {f"{prefix}_accuracy": float(teacher_agrees(targets, actions).mean())}
    safe = safe_choice_rate(targets, actions)
    if safe is not None:
        scores[f"{prefix}_safe"] = safe
    return scores
