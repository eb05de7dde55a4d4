"""ActionPolicy: chooses each env's next action, at once or by batched greedy inference."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..runtime.env_lifecycle import EnvironmentState
from ..runtime.thread_safe_model import ThreadSafeModel
from .action_masker import ActionMasker
from .exploration import ExplorationStrategy
from .model import DQNModel

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv


class ActionPolicy:
    """Selects actions for each actor environment and enqueues them for execution.

    During warmup, random-controlled trajectory replay, or epsilon-greedy exploration,
    an action is sampled and enqueued immediately; otherwise the environment is queued
    for batched greedy inference, with the resulting action applied once the batch
    completes.

    Args:
        action_masker: Restricts sampled/greedy actions to the game's training action set.
        exploration_strategy: Decides when to explore and the current exploration value.
        actor_model: The local model, for exploration-driven noise resets.
        learner_model_container: The learner model container, for weight sync after inference.
        num_steps_sampled_before_learning_starts: Steps before learning starts, during which
            actions are always sampled randomly regardless of the exploration strategy.
        queue_for_inference: Queues an environment/observation for batched greedy inference.
        record_random_step: Records a random-controlled trajectory-replay step.
    """

    def __init__(
        self,
        action_masker: ActionMasker,
        exploration_strategy: ExplorationStrategy,
        actor_model: DQNModel,
        learner_model_container: ThreadSafeModel[DQNModel],
        num_steps_sampled_before_learning_starts: int,
        *,
        queue_for_inference: Callable[[int, np.ndarray[Any, Any]], None],
        record_random_step: Callable[[], None],
    ) -> None:
        self.action_masker = action_masker
        self.exploration_strategy = exploration_strategy
        self.actor_model = actor_model
        self.learner_model_container = learner_model_container
        self.num_steps_sampled_before_learning_starts = num_steps_sampled_before_learning_starts
        self._queue_for_inference = queue_for_inference
        self._record_random_step = record_random_step
        self._synced_version = 0
        self.random_actions = 0
        self.greedy_actions = 0

    def get_exploration_value(self, step: int) -> float | None:
        """Get the current exploration value (epsilon), for metrics logging.

        Returns None for exploration strategies without one (for example noisy nets).
        """
        return self.exploration_strategy.value(step)

    def select_and_enqueue_action(
        self, env: OakEmuMultiEnv, env_id: int, env_state: EnvironmentState, *, step: int
    ) -> None:
        """Select an action and either submit it at once or queue the env for inference."""
        if env_state.random_control:
            self._record_random_step()
            self._submit_random(env, env_id, env_state)
        elif (
            step < self.num_steps_sampled_before_learning_starts
            or self.exploration_strategy.should_explore(step, env_state.rng)
        ):
            self._submit_random(env, env_id, env_state)
        else:
            assert env_state.observation is not None, f"env {env_id} has no observation"
            self._queue_for_inference(env_id, env_state.observation)

    def _submit_random(self, env: OakEmuMultiEnv, env_id: int, env_state: EnvironmentState) -> None:
        action = self.action_masker.sample(env_state.rng)
        env_state.last_action = action
        env_state.last_action_greedy = False
        self.random_actions += 1
        env.submit(env_id, action)

    def on_inference_complete(self, env_state: EnvironmentState, action: int) -> None:
        """Record the greedy action chosen by batched inference."""
        env_state.last_action = int(action)
        env_state.last_action_greedy = True
        self.greedy_actions += 1

    def reset_noise_before_inference(self, step: int, num_environments: int) -> None:
        """Redraw the actor model's noise before an inference flush, if the strategy says so."""
        if self.exploration_strategy.uses_noise and self.exploration_strategy.should_reset_noise(
            step, num_environments
        ):
            self.actor_model.reset_noise()

    def sync_weights_after_inference(self) -> None:
        """Copy the learner's weights if a newer version exists; redraw noise afterwards
        if the strategy uses noise."""
        version = self.learner_model_container.copy_to(self.actor_model, self._synced_version)
        if version is not None:
            self._synced_version = version
            if self.exploration_strategy.uses_noise:
                self.actor_model.reset_noise()

    @property
    def synced_version(self) -> int:
        """The learner-model version the actor model holds."""
        return self._synced_version

    def invalidate_sync(self) -> None:
        """Force a weight copy at the next sync (after the learner model was restored)."""
        self._synced_version = -1
