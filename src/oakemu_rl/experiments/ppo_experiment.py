"""PPOExperiment: what a PPO run adds to the shared `Experiment`.

Threads: the actor (`PPOActor.run`), the learner (`PPOLearner`) and the tester run in
this process; the envs run in worker processes. Checkpoints are taken by the learner
between rollouts (its `on_rollout` hook), while the actor waits for the rollout's
release, so every checkpoint is a consistent state; an actor that overlaps collection
with training waits for the rollouts that end at a checkpoint (the handshake's
`wait_at`).
"""

from __future__ import annotations

from typing import Any, cast

from ..ppo.actor import PPOActor
from ..ppo.config import PPOExperimentConfiguration
from ..ppo.handshake import RolloutHandshake
from ..ppo.learner import PPOLearner
from ..ppo.model import PPOModel
from ..ppo.rollout_buffer import RolloutBuffer
from ..ppo.state_adapter import PPOStateAdapter
from ..ppo.tester import PPOTester
from .experiment import Experiment

__all__ = ["PPOExperiment"]


class PPOExperiment(
    Experiment[PPOExperimentConfiguration],
    algo="ppo",
    config_type=PPOExperimentConfiguration,
    tester_type=PPOTester,
    adapter_type=PPOStateAdapter,
):
    """One PPO run. Takes the arguments of `Experiment`."""

    actor: PPOActor
    learner: PPOLearner

    @staticmethod
    def build_model(
        config: PPOExperimentConfiguration, observation_shape: tuple[int, ...], num_actions: int
    ) -> PPOModel:
        """The actor-critic network a configuration describes."""
        layout = config.model.model_dump()
        return PPOModel(
            observation_shape, num_actions, allowed_actions=config.env.allowed_actions, **layout
        )

    def _optimizer_settings(self) -> tuple[float, float]:
        return self.config.ppo.learning_rate, self.config.ppo.adam_eps

    def _build_algorithm(self, env: Any, observation_shape: tuple[int, ...], dtype: Any) -> None:
        config, context = self.config, self.context
        self.rollout_buffer = RolloutBuffer(
            config.ppo.rollout_steps, config.env.num_envs, observation_shape, dtype, context.device
        )
        self.handshake = RolloutHandshake(context.stop_event, wait_at=self._saves_at)
        self.actor = PPOActor(
            context,
            cast(PPOModel, self.actor_model),
            self.container,
            self.rollout_buffer,
            self.handshake,
            env_factory=lambda: env,
        )
        self.learner = PPOLearner(
            context,
            self.container,
            self.optimizer,
            self.rollout_buffer,
            self.handshake,
            lambda: self.actor.steps,
            monitor=self.rollback,
            on_rollout=self._at_schedule_point,
        )

    def _stop_algorithm(self) -> None:
        self.handshake.stop()

    def _summary_extra(self) -> dict[str, Any]:
        return {"rollouts": self.learner.rollouts}

    def _counts(self) -> str:
        return f"{self.learner.rollouts:,} rollouts, {super()._counts()}"
