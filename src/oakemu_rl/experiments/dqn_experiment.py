"""DQNExperiment: what a DQN run adds to the shared `Experiment`.

Threads: the actor (`Trainer.run`), the learner (`Learner`, with its batch-prefetch
thread), the replay writer and the tester run in this process; the envs run in worker
processes. Checkpoints are taken on the actor thread, between two env results, with the
replay pipeline frozen and the learner caught up with the replay ratio.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, cast

import torch

from ..dqn.config import DQNExperimentConfiguration
from ..dqn.demo_replay import build_demonstration_buffer
from ..dqn.learner import Learner
from ..dqn.model import DQNModel
from ..dqn.replay_buffer import ReplayBuffer
from ..dqn.replay_writer import ReplayWriter
from ..dqn.state_adapter import DQNStateAdapter
from ..dqn.tester import Tester
from ..dqn.trainer import Trainer
from ..runtime.config_base import ConfigError
from ..runtime.reward_shaping import RewardShapingPipeline
from .experiment import Experiment

__all__ = ["DQNExperiment", "build_replay_buffer"]


def build_replay_buffer(
    config: DQNExperimentConfiguration, observation_shape: tuple[int, ...], dtype: Any
) -> ReplayBuffer:
    """The replay buffer a configuration describes (frames of stacked observations are
    stored once)."""
    frame_stack = config.env.observation.frame_stack
    if config.game.startswith("gym:") or observation_shape[0] % frame_stack:
        frame_stack = 1  # gym: envs and vector observations stack no frames
    r = config.replay
    return ReplayBuffer(
        r.capacity,
        observation_shape,
        observation_dtype=dtype,
        frame_stack=frame_stack,
        n_step=r.n_step,
        gamma=config.learner.gamma,
        prioritized=r.prioritized,
        alpha=r.alpha,
        priority_eps=r.priority_eps,
        n_step_start=r.n_step_anneal.start if r.n_step_anneal else None,
        n_step_anneal=r.n_step_anneal.steps if r.n_step_anneal else 1,
    )


def _q_network_names(name: str) -> list[str]:
    """The names a `PPOModel` torso tensor may have in a `DQNModel`: the same name, and for
    a CNN torso (PPO's convolutions sit in a block of their own, ``torso.0``) the name
    without that block."""
    names = [name]
    if name.startswith("torso.0."):
        names.append("torso." + name[len("torso.0.") :])
    return names


class DQNExperiment(
    Experiment[DQNExperimentConfiguration],
    algo="dqn",
    config_type=DQNExperimentConfiguration,
    tester_type=Tester,
    adapter_type=DQNStateAdapter,
):
    """One DQN run. Takes the arguments of `Experiment`."""

    actor: Trainer
    learner: Learner

    @staticmethod
    def build_model(
        config: DQNExperimentConfiguration, observation_shape: tuple[int, ...], num_actions: int
    ) -> DQNModel:
        """The Q-network a configuration describes (`model.compile` is the learner's)."""
        layout = config.model.model_dump(exclude={"compile"})
        return DQNModel(observation_shape, num_actions, **layout)

    def _optimizer_settings(self) -> tuple[float, float]:
        return self.config.learner.learning_rate, self.config.learner.adam_eps

    def _build_algorithm(self, env: Any, observation_shape: tuple[int, ...], dtype: Any) -> None:
        config, context = self.config, self.context
        num_actions = int(env.action_space.n)
        self.target_model = self.build_model(config, observation_shape, num_actions)
        self.target_model.to(context.device).train()
        self.replay_buffer = build_replay_buffer(config, observation_shape, dtype)
        # DQfD: the demonstrations' own part of replay, rebuilt from the files on resume.
        self.demonstration_buffer: ReplayBuffer | None = None
        # One pipeline: a `normalize` shaper's statistics start from the demonstrations'
        # returns and go on with the agent's.
        shaping = RewardShapingPipeline.from_config(
            config.reward_shaping, gamma=config.learner.gamma, game=config.game
        )
        if context.demonstrations is not None and config.demos.learn:
            self.demonstration_buffer = build_demonstration_buffer(
                context.demonstrations, self.replay_buffer, shaping, config.episodic_life
            )
        self.writer = ReplayWriter(
            self.replay_buffer, config.replay.writer_queue_size, on_error=context.report_error
        )
        self.actor = self.trainer = Trainer(
            context,
            cast(DQNModel, self.actor_model),
            self.container,
            self.replay_buffer,
            self.writer,
            shaping,
            env_factory=lambda: env,
        )
        self.learner = Learner(
            context,
            self.container,
            self.target_model,
            self.optimizer,
            lambda: self.trainer.replay_buffer,
            self.trainer.replay_ratio_gate,
            self.trainer.action_masker,
            lambda: self.trainer.steps,
            monitor=self.rollback,
            demonstrations=self.demonstration_buffer,
        )
        every = config.checkpoint.every_steps
        if config.tester.enabled:
            every = math.gcd(every, config.tester.every_steps)
        self.trainer.add_step_hook(every, self._at_schedule_point)

    def _load_student(self, student: dict[str, torch.Tensor]) -> str:
        """The student's torso (a distill run's `PPOModel`), where its tensors' names and
        shapes match this Q-network's, into the online and the target network; the heads
        start afresh (a policy's logits are not Q-values)."""
        own = self.learner_model.state_dict()
        torso = {name: tensor for name, tensor in student.items() if name.startswith("torso.")}
        copied: dict[str, torch.Tensor] = {}
        for name, tensor in torso.items():
            for candidate in _q_network_names(name):
                if candidate in own and own[candidate].shape == tensor.shape:
                    copied[candidate] = tensor
                    break
        if not copied:
            raise ConfigError(
                f"init_from: none of the student's {len(torso)} torso tensors matches this "
                "Q-network's by name and shape (give the DQN run the distill run's torso: "
                "model.torso and model.mlp_hidden, and its env.observation)"
            )
        with self.container.update() as model:
            model.load_state_dict(copied, strict=False)
        weights = self.learner_model.state_dict()
        self.actor_model.load_state_dict(weights)
        self.learner.target.load(weights)
        return (
            f"{len(copied)} of the student's {len(torso)} torso tensors copied into the online "
            "and target Q-networks"
        )

    def _consistent_checkpoint(self, step: int) -> AbstractContextManager[None]:
        return self._frozen_and_caught_up(step)

    @contextlib.contextmanager
    def _frozen_and_caught_up(self, step: int) -> Iterator[None]:
        # Every step so far is in the buffer, and the learner made every update due at
        # `step`: a checkpoint's update count is exactly the replay ratio's.
        with self.trainer.freeze_replay_pipeline():
            self.learner.catch_up(step)
            yield

    def _finish_budget(self) -> None:
        with self.trainer.freeze_replay_pipeline():
            self.learner.catch_up(self.trainer.steps)

    def _start_algorithm(self) -> None:
        self.writer.start()

    def _stop_algorithm(self) -> None:
        self.writer.close()

    def _summary_extra(self) -> dict[str, Any]:
        trainer = self.trainer
        return {
            "replay_size": len(trainer.replay_buffer),
            "epsilon": trainer.policy.get_exploration_value(trainer.steps),
        }
