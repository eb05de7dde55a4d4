"""DistillExperiment: what a distillation run adds to the shared `Experiment`.

Threads: the actor (`DistillActor.run`), the learner (`DistillLearner`) and the tester
run in this process; the training envs run in worker processes, each wrapped by
`LabelWithTeacher`, so that the search teacher labels every state beside its emulator
and only the label crosses the pipe. The tester's envs carry no teacher: evaluation is
the student alone, greedy, as PPO's (`PPOTester`). Checkpoints are taken on the actor
thread between two results (a step hook), with the learner held between updates.
"""

from __future__ import annotations

import copy
import math
from typing import Any, cast

from torch import nn

from ..distill.actor import DistillActor
from ..distill.config import DistillExperimentConfiguration
from ..distill.dataset import DistillDataset
from ..distill.ensemble import Student, StudentEnsemble
from ..distill.learner import DistillLearner
from ..distill.schedule import BetaSchedule
from ..distill.state_adapter import DistillStateAdapter
from ..games.loader import GameDefinition
from ..ppo.model import PPOModel
from ..ppo.tester import PPOTester
from ..runtime.config_base import ConfigError
from ..runtime.replay_ratio_gate import ReplayRatioGate
from ..trajectories.teacher import LabelWithTeacher
from .experiment import Experiment

__all__ = ["DistillExperiment"]


class DistillExperiment(
    Experiment[DistillExperimentConfiguration],
    algo="distill",
    config_type=DistillExperimentConfiguration,
    tester_type=PPOTester,
    adapter_type=DistillStateAdapter,
):
    """One distillation run. Takes the arguments of `Experiment`."""

    actor: DistillActor
    learner: DistillLearner

    @staticmethod
    def build_model(
        config: DistillExperimentConfiguration,
        observation_shape: tuple[int, ...],
        num_actions: int,
    ) -> Student:
        """The student a configuration describes: PPO's actor-critic network, or with
        `distill.members` an ensemble of them."""
        members = [
            PPOModel(observation_shape, num_actions, **config.model.model_dump())
            for _ in range(config.distill.members)
        ]
        return members[0] if len(members) == 1 else StudentEnsemble(members)

    def _trained_model(self) -> nn.Module:
        if self.config.distill.ema_decay is None:
            return self.learner_model
        return copy.deepcopy(self.learner_model)  # the learner model is its average

    def _optimizer_settings(self) -> tuple[float, float]:
        return self.config.distill.learning_rate, self.config.distill.adam_eps

    def _check_algorithm_game_settings(self, game: GameDefinition) -> None:
        try:
            self.config.distill.teacher_settings().check_hidden(game)
        except ValueError as exc:
            raise ConfigError(f"distill.hidden: {exc}") from None

    def _training_env_wrapper(self) -> LabelWithTeacher:
        return LabelWithTeacher(self.config.distill.teacher_settings())

    def _build_algorithm(self, env: Any, observation_shape: tuple[int, ...], dtype: Any) -> None:
        config, context = self.config, self.context
        settings = config.distill
        observation = (
            self._auto_choice.config if self._auto_choice is not None else config.env.observation
        )
        try:
            self.dataset = DistillDataset(
                settings.dataset_bytes,
                observation_shape,
                dtype,
                int(env.action_space.n),
                critical_weight=settings.critical_weight,
                binary=observation.binary,
                decisions_only=settings.loss == "safe_set",
            )
        except ValueError as exc:
            raise ConfigError(f"distill.dataset_bytes: {exc}") from None
        if self.dataset.capacity < settings.learning_starts:
            raise ConfigError(
                f"distill.dataset_bytes: {settings.dataset_bytes:,} bytes hold "
                f"{self.dataset.capacity:,} states of {self.dataset.entry_bytes:,} bytes, fewer "
                f"than distill.learning_starts ({settings.learning_starts:,}); raise it"
            )
        schedule = BetaSchedule(
            settings.beta_start,
            settings.beta_end,
            settings.beta_decay_steps,
            budget_used=context.budget_used,
        )
        gate = ReplayRatioGate(
            settings.updates_per_step, settings.learning_starts, settings.max_lag_updates
        )
        self.actor = DistillActor(
            context,
            cast(Student, self.actor_model),
            self.container,
            self.dataset,
            schedule,
            gate,
            env_factory=lambda: env,
        )
        self.learner = DistillLearner(
            context,
            self.container,
            cast(Student, self.trained_model),
            self.optimizer,
            self.dataset,
            gate,
            lambda: self.actor.steps,
            monitor=self.rollback,
        )
        every = config.checkpoint.every_steps
        if config.tester.enabled:
            every = math.gcd(every, config.tester.every_steps)
        self.actor.add_step_hook(every, self._at_schedule_point)

    def _summary_extra(self) -> dict[str, Any]:
        actor = self.actor
        return {
            "labels": actor.labels,
            "teacher_actions": actor.teacher_actions,
            "interventions": actor.interventions,
            "beta": actor.schedule(actor.steps),
            "dataset_size": len(self.dataset),
            "dataset_bytes": self.dataset.nbytes,
            "holdout_accuracy": self.learner.last_metrics.get("distill/holdout_accuracy"),
            "holdout_safe": self.learner.last_metrics.get("distill/holdout_safe"),
            "refits": self.learner.last_metrics.get("distill/refits"),
        }

    def _counts(self) -> str:
        return f"{self.actor.labels:,} labels, {super()._counts()}"
