"""PPOExperiment: what a PPO run adds to the shared `Experiment`.

Threads: the actor (`PPOActor.run`), the learner (`PPOLearner`) and the tester run in
this process; the envs run in worker processes. Checkpoints are taken by the learner
between rollouts (its `on_rollout` hook), while the actor waits for the rollout's
release, so every checkpoint is a consistent state; an actor that overlaps collection
with training waits for the rollouts that end at a checkpoint (the handshake's
`wait_at`).

With demonstrations (`demos.paths`) and `demos.learn`, the learner adds a behaviour-cloning
loss: the experiment fills a replay observation cache with as many demonstration steps
as `bc.cache_bytes` holds before training; the learner's `BCSampler` asks for the others
through a `BCMaterialisationSource`, and the actor rebuilds them into the cache.
"""

from __future__ import annotations

from typing import Any, cast

import torch

from ..ppo.actor import PPOActor
from ..ppo.bc import BCMaterialisationSource, BCSampler, ReplayObservationCache, prefill_cache
from ..ppo.config import PPOExperimentConfiguration
from ..ppo.handshake import RolloutHandshake
from ..ppo.learner import PPOLearner
from ..ppo.model import PPOModel
from ..ppo.rollout_buffer import RolloutBuffer
from ..ppo.state_adapter import PPOStateAdapter
from ..ppo.tester import PPOTester
from ..runtime.config_base import ConfigError
from ..runtime.progress import progress_bar
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
            observation_shape,
            num_actions,
            allowed_actions=config.env.allowed_actions,
            value_normalization=config.ppo.value_normalization,
            **layout,
        )

    def _optimizer_settings(self) -> tuple[float, float]:
        return self.config.ppo.learning_rate, self.config.ppo.adam_eps

    def _build_algorithm(self, env: Any, observation_shape: tuple[int, ...], dtype: Any) -> None:
        config, context = self.config, self.context
        self.rollout_buffer = RolloutBuffer(
            config.ppo.rollout_steps, config.env.num_envs, observation_shape, dtype, context.device
        )
        self.handshake = RolloutHandshake(context.stop_event, wait_at=self._saves_at)
        cache, self.bc_source, sampler = self._behaviour_cloning(observation_shape)
        self.actor = PPOActor(
            context,
            cast(PPOModel, self.actor_model),
            self.container,
            self.rollout_buffer,
            self.handshake,
            replay_observation_cache=cache,
            env_factory=lambda: env,
        )
        self.actor.set_bc_materialisation_source(self.bc_source)
        self.learner = PPOLearner(
            context,
            self.container,
            self.optimizer,
            self.rollout_buffer,
            self.handshake,
            lambda: self.actor.steps,
            monitor=self.rollback,
            on_rollout=self._at_schedule_point,
            bc_sampler=sampler,
        )

    def _behaviour_cloning(
        self, observation_shape: tuple[int, ...]
    ) -> tuple[ReplayObservationCache | None, BCMaterialisationSource | None, BCSampler | None]:
        """The cache (filled with what fits), the request source and the sampler of the BC
        loss; Nones without demonstrations or with `demos.learn` off."""
        config, demonstrations = self.config, self.context.demonstrations
        if demonstrations is None or not config.demos.learn:
            return None, None, None
        cache = ReplayObservationCache(config.bc.cache_bytes)
        with progress_bar(
            demonstrations.total_steps, "caching demonstration observations", self.show_console
        ) as advance:
            cached = prefill_cache(cache, demonstrations, advance)
        first = cache.get(0, 0)
        if first is not None and first.shape != observation_shape:
            raise ValueError(
                f"demonstration observations have shape {first.shape}; the envs' have "
                f"{observation_shape}"
            )
        self._message(
            f"behaviour cloning: {cached:,} of {demonstrations.total_steps:,} demonstration "
            f"steps cached ({cache.nbytes / 2**20:.1f} MiB of bc.cache_bytes)"
        )
        source = BCMaterialisationSource()
        sampler = BCSampler(
            demonstrations,
            cache,
            source,
            config.bc.batch_size,
            self.context.spawn_rng("bc_sampler"),
            allowed_actions=config.env.allowed_actions,
        )
        return cache, source, sampler

    def _load_student(self, student: dict[str, torch.Tensor]) -> str:
        """The whole student (a distill run's `PPOModel`): policy, value head and torso."""
        own = self.learner_model.state_dict()
        wrong = sorted(set(own) ^ set(student)) + [
            f"{name} {tuple(student[name].shape)} (this run: {tuple(own[name].shape)})"
            for name in sorted(set(own) & set(student))
            if own[name].shape != student[name].shape
        ]
        if wrong:
            raise ConfigError(
                "init_from: the student's network does not match this run's model (give the "
                "PPO run the distill run's model and env.observation settings): "
                f"{', '.join(wrong[:4])}"
                + (f" and {len(wrong) - 4} more" if len(wrong) > 4 else "")
            )
        self.container.load_state_dict(student)
        self.actor_model.load_state_dict(student)
        return f"the student's whole network ({len(student)} tensors)"

    def _stop_algorithm(self) -> None:
        self.handshake.stop()
        if self.bc_source is not None:
            self.bc_source.close()

    def _summary_extra(self) -> dict[str, Any]:
        return {"rollouts": self.learner.rollouts}

    def _counts(self) -> str:
        return f"{self.learner.rollouts:,} rollouts, {super()._counts()}"
