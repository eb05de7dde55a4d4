"""DistillActor: plays the training episodes, teacher or student acting, and gathers the
teacher's labels into the aggregated dataset."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from ..envs.lives import lives_lost
from ..runtime.actor import ActorBase, EpisodeObserver
from ..runtime.context import RuntimeContext
from ..runtime.env_lifecycle import ActorRuntimeState, EnvironmentState
from ..runtime.replay_ratio_gate import ReplayRatioGate
from ..runtime.thread_safe_model import ThreadSafeModel
from .config import DistillExperimentConfiguration
from .dataset import DistillDataset, rules_out
from .ensemble import Student
from .schedule import BetaSchedule

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv, StepResult

__all__ = ["DistillActor", "teacher_agrees"]


#: A target entry this close to the largest counts as one of the teacher's best actions.
_TIE = 1e-6


def teacher_agrees(
    targets: npt.NDArray[np.floating], actions: npt.NDArray[np.integer]
) -> npt.NDArray[np.bool_]:
    """Per row, whether `actions[i]` is one of the actions the soft target `targets[i]`
    gives the most mass (ties count: where the teacher finds several actions equally
    good, the student agrees by taking any of them)."""
    rows = np.arange(len(actions))
    agrees: npt.NDArray[np.bool_] = targets[rows, actions] >= targets.max(axis=1) - _TIE
    return agrees


def safe_choice_rate(
    targets: npt.NDArray[np.floating], actions: npt.NDArray[np.integer]
) -> float | None:
    """On the rows where the teacher found some action to lose a life (mass 0) and another
    not to, the share on which `actions[i]` is one that does not (None: no such row). A
    single lost life ends a win, so this, not agreement, says how close a student is."""
    critical = rules_out(targets)  # a target's mass is never all on zero
    if not critical.any():
        return None
    chosen = targets[np.flatnonzero(critical), actions[critical]]
    return float((chosen > 0).mean())


@dataclass
class _Labelled:
    """An env's labelled state, waiting for the student's pass."""

    env_id: int
    target: npt.NDArray[np.float32]
    teacher_action: int | None
    """The teacher's action (drawn from its target) when the teacher acts; None when the
    student does."""
    entry_id: int
    """The state's id in the dataset."""


def _draw(target: npt.NDArray[np.float32], rng: np.random.Generator) -> int:
    """An action drawn from the soft target."""
    cumulative = np.cumsum(target, dtype=np.float64)
    pick = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    return min(pick, len(target) - 1)


class DistillActor(ActorBase[DistillExperimentConfiguration, _Labelled]):
    """Plays the training envs, whose every state comes labelled by the teacher in the
    env worker (``info["teacher"]``, from `LabelWithTeacher`).

    Consumes env results (resets and steps, in the order envs finish them); produces
    actions and the aggregated dataset. For each labelled state it:

    1. adds the observation and the teacher's soft target to the `DistillDataset`
       (held out of training with chance `distill.holdout_fraction`);
    2. lets the teacher act with chance beta (the `BetaSchedule` at this env step): the
       action is drawn from the teacher's target; otherwise the student acts with its
       most likely action. The student's pass runs on every labelled state either way,
       batched over the ready envs, to measure its agreement with the teacher;
    3. with `distill.intervene`, where the student's action loses a life that another
       keeps (no target mass on it), the teacher acts instead, drawn from its target, and
       the state is marked critical;
    4. when a step loses a life (``info["lives"]`` falls) or loses the game, marks the
       env's last `distill.critical_steps` states critical.

    Actor scalars: ``distill/labels_per_s``, ``distill/teacher_ms``, ``distill/agreement``,
    ``distill/beta``, ``distill/interventions`` (the share of the student's actions the
    teacher overrode; with `intervene` only), ``distill/dataset_size``,
    ``distill/critical_states`` and ``perf/actor_wait_s`` (seconds spent waiting for the
    learner, over the run).

    Args:
        context: the run's context.
        actor_model: the student the actor plays with (a copy of the learner's).
        learner_model: the learner model's container, where new weights come from.
        dataset: where labelled states go.
        schedule: the chance that the teacher acts, by env step.
        gate: paces the learner's updates to labelled states (shared with the learner);
            the actor waits there while the learner lags far behind.
        env_factory: builds the labelled training multi-env.
        episode_observer: called with each finished episode (see `EpisodeObserver`).
    """

    def __init__(
        self,
        context: RuntimeContext[DistillExperimentConfiguration],
        actor_model: Student,
        learner_model: ThreadSafeModel[Student],
        dataset: DistillDataset,
        schedule: BetaSchedule,
        gate: ReplayRatioGate,
        env_factory: Callable[[], OakEmuMultiEnv] | None = None,
        episode_observer: EpisodeObserver | None = None,
    ) -> None:
        super().__init__(context, actor_model, learner_model, env_factory, episode_observer)
        self.actor_model: Student = actor_model
        self.dataset = dataset
        self.schedule = schedule
        self.gate = gate
        settings = context.config.distill
        self._holdout_fraction = settings.holdout_fraction
        self._intervene = settings.intervene
        num_envs = context.config.env.num_envs
        self._recent: list[deque[int]] = [
            deque(maxlen=settings.critical_steps) for _ in range(num_envs)
        ]
        self._next_label: list[dict[str, Any] | None] = [None] * num_envs
        self._synced_version = -1
        self.labels = 0
        """States labelled so far (over the run)."""
        self.teacher_actions = 0
        """Actions the teacher took so far (over the run), interventions included."""
        self.interventions = 0
        """Student actions the teacher overrode so far (over the run; `intervene`)."""
        self._window = {
            "labels": 0.0,
            "seconds": 0.0,
            "agreed": 0.0,
            "judged": 0.0,
            "student": 0.0,
            "overridden": 0.0,
        }
        self._window_start = time.monotonic()

    # -- labels ---------------------------------------------------------------------------

    def _label_of(self, env_id: int, info: dict[str, Any]) -> dict[str, Any]:
        label = info.get("teacher")
        if not isinstance(label, dict):
            raise RuntimeError(
                f"env {env_id}: its result has no teacher label (info['teacher']); distill's "
                "training envs must be built with env_wrapper=LabelWithTeacher(...) (the "
                "experiment does so unless an env_factory replaces its envs)"
            )
        return label

    def _take_label(self, state: EnvironmentState, label: dict[str, Any]) -> None:
        """Keep the labelled state, decide who acts, and queue it for the student."""
        assert state.observation is not None
        target = np.asarray(label["target"], dtype=np.float32)
        rng = state.rng
        holdout = bool(rng.random() < self._holdout_fraction)
        entry_id = self.dataset.add(state.observation, target, holdout=holdout)
        self._recent[state.env_id].append(entry_id)
        teacher_action: int | None = None
        if rng.random() < self.schedule(self._steps):
            teacher_action = _draw(target, rng)
        self.labels += 1
        window = self._window
        window["labels"] += 1
        window["seconds"] += float(label.get("seconds", 0.0))
        self._queue_for_inference(
            _Labelled(state.env_id, target, teacher_action, entry_id), state.observation
        )

    # -- the algorithm's part of the loop ---------------------------------------------------

    def _start_episodes(self, env: OakEmuMultiEnv) -> None:
        self._sync_weights()
        self._next_label = [None] * len(self._next_label)
        super()._start_episodes(env)

    def _on_episode_start(
        self, env: OakEmuMultiEnv, state: EnvironmentState, result: StepResult
    ) -> None:
        self._recent[state.env_id].clear()
        self._take_label(state, self._label_of(state.env_id, result.info))

    def _record_step(
        self, state: EnvironmentState, result: StepResult, next_observation: npt.NDArray[Any]
    ) -> float:
        # `state` still describes the env before this step: its lives are the old ones.
        env_id = state.env_id
        lost_life = lives_lost(state.last_lives, result.info.get("lives")) > 0
        lost_game = bool(result.terminated) and result.info.get("outcome") == "loss"
        if lost_life or lost_game:
            self.dataset.mark_critical(self._recent[env_id])
            self._recent[env_id].clear()
        if not (result.terminated or result.truncated):
            self._next_label[env_id] = self._label_of(env_id, result.info)
        return float(result.reward)

    def _choose_action(self, env: OakEmuMultiEnv, state: EnvironmentState) -> None:
        label = self._next_label[state.env_id]
        assert label is not None, f"env {state.env_id} has no label for its next action"
        self._next_label[state.env_id] = None
        self._take_label(state, label)

    def _on_worker_lost(self, state: EnvironmentState) -> None:
        self._recent[state.env_id].clear()
        self._next_label[state.env_id] = None

    def _act_on_batch(
        self,
        env: OakEmuMultiEnv,
        observations: npt.NDArray[Any],
        batch: torch.Tensor,
        entries: list[_Labelled],
    ) -> None:
        with torch.inference_mode():
            student = self.actor_model.greedy_actions(batch).cpu().numpy()
        targets = np.stack([entry.target for entry in entries])
        agrees = teacher_agrees(targets, student)
        self._window["agreed"] += float(agrees.sum())
        self._window["judged"] += float(len(entries))
        for entry, action in zip(entries, student.tolist(), strict=True):
            state = self.lifecycle[entry.env_id]
            teacher_action = entry.teacher_action
            if teacher_action is None and self._intervene:
                self._window["student"] += 1
                if entry.target[action] <= 0:  # it loses a life that another action keeps
                    teacher_action = _draw(entry.target, state.rng)
                    self.dataset.mark_critical([entry.entry_id])
                    self.interventions += 1
                    self._window["overridden"] += 1
            chosen = int(action) if teacher_action is None else teacher_action
            state.last_action = chosen
            state.last_action_greedy = teacher_action is None
            self.teacher_actions += teacher_action is not None
            env.submit(entry.env_id, chosen)

    def _after_batch(self, env: OakEmuMultiEnv) -> bool:
        self._sync_weights()
        self.gate.set_env_steps(self.dataset.added)
        self.gate.actor_wait(self.context.stop_event)  # while the learner lags far behind
        return True

    def _sync_weights(self) -> None:
        version = self.learner_model.copy_to(self.actor_model, self._synced_version)
        if version is not None:
            self._synced_version = version

    # -- metrics and state ----------------------------------------------------------------

    def _actor_scalars(self) -> dict[str, float]:
        now = time.monotonic()
        window = self._window
        elapsed = max(1e-9, now - self._window_start)
        scalars = {
            "distill/labels_per_s": window["labels"] / elapsed,
            "distill/beta": self.schedule(self._steps),
            "distill/dataset_size": float(len(self.dataset)),
            "distill/critical_states": float(self.dataset.criticals),
            "perf/actor_wait_s": self.gate.actor_wait_s,
        }
        if window["labels"]:
            scalars["distill/teacher_ms"] = 1e3 * window["seconds"] / window["labels"]
        if window["judged"]:
            scalars["distill/agreement"] = window["agreed"] / window["judged"]
        if window["student"]:
            scalars["distill/interventions"] = window["overridden"] / window["student"]
        self._window = dict.fromkeys(window, 0.0)
        self._window_start = now
        return scalars

    def _extra_state(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "teacher_actions": self.teacher_actions,
            "interventions": self.interventions,
        }

    def _restore_extra(self, state: ActorRuntimeState) -> None:
        self.labels = int(state.extra.get("labels", 0))
        self.teacher_actions = int(state.extra.get("teacher_actions", 0))
        self.interventions = int(state.extra.get("interventions", 0))
        self._synced_version = -1
