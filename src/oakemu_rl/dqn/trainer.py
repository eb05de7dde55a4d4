"""Trainer: the DQN actor. Steps the envs, chooses actions, stages transitions for replay."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import numpy.typing as npt
import torch

from ..runtime.actor import ActorBase
from ..runtime.context import RuntimeContext
from ..runtime.env_lifecycle import ActorRuntimeState, EnvironmentState
from ..runtime.replay_ratio_gate import ReplayRatioGate
from ..runtime.reward_shaping import RewardShapingPipeline
from ..runtime.thread_safe_model import ThreadSafeModel
from .action_masker import ActionMasker
from .action_policy import ActionPolicy
from .config import DQNExperimentConfiguration
from .exploration import ExplorationStrategy
from .model import DQNModel
from .replay_buffer import ReplayBuffer, Transition
from .replay_writer import ReplayWriter

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv, StepResult


class Trainer(ActorBase[DQNExperimentConfiguration, int]):
    """Trainer component responsible for interacting with the environment and collecting
    transitions.

    Consumes env results in the order envs finish them. For each, the ActionPolicy
    either submits an action at once (warm-up, exploration) or queues the env for
    batched greedy inference; after the batch, the actor model syncs with the learner.
    Produces transitions, shaped by the reward-shaping pipeline and staged per env;
    staged batches go to the ReplayWriter thread. The `replay_ratio_gate` holds the
    actor back while a running learner lags too far behind the replay ratio.

    Args:
        context: The shared runtime context.
        actor_model: The local DQN model for action selection.
        learner_model: The learner model container (for weight sync).
        replay_buffer: The experience replay buffer.
        replay_writer: Dedicated replay-writer runtime for replay inserts.
        reward_shaping: Optional actor-owned reward-shaping pipeline.
        env_factory: Optional multi-environment factory (default: the configured game).
    """

    def __init__(
        self,
        context: RuntimeContext[DQNExperimentConfiguration],
        actor_model: DQNModel,
        learner_model: ThreadSafeModel[DQNModel],
        replay_buffer: ReplayBuffer,
        replay_writer: ReplayWriter,
        reward_shaping: RewardShapingPipeline | None = None,
        env_factory: Callable[[], OakEmuMultiEnv] | None = None,
    ) -> None:
        super().__init__(context, actor_model, learner_model, env_factory)
        self.actor_model: DQNModel = actor_model
        config = context.config
        self._replay_buffer = replay_buffer
        self._replay_writer = replay_writer
        self.reward_shaping = reward_shaping or RewardShapingPipeline()
        self.action_masker = ActionMasker(actor_model.num_actions, config.env.allowed_actions)
        self.exploration = ExplorationStrategy.from_settings(config.exploration)
        learner = config.learner
        self.replay_ratio_gate = ReplayRatioGate(
            learner.replay_ratio, learner.learning_starts, learner.max_lag_updates
        )
        self.policy = ActionPolicy(
            self.action_masker,
            self.exploration,
            actor_model,
            learner_model,
            learner.learning_starts,
            queue_for_inference=self._queue_for_inference,
            record_random_step=self._trajectory_runtime.record_random_step,
        )
        self._staged: list[Transition] = []
        self._stage_lock = threading.Lock()
        self._frozen = 0
        self._freeze_lock = threading.RLock()
        self._freeze_depth = 0

    # -- properties -----------------------------------------------------------------------

    @property
    def replay_buffer(self) -> ReplayBuffer:
        """Get the replay buffer."""
        return self._replay_buffer

    @property
    def replay_writer(self) -> ReplayWriter:
        """The replay-writer runtime that inserts staged transitions."""
        return self._replay_writer

    @property
    def replay_queue_depth(self) -> int:
        """Get the number of replay batches waiting to be inserted."""
        return self._replay_writer.queue_depth

    @property
    def staged_transition_count(self) -> int:
        """Get the number of transitions currently staged on the actor."""
        return len(self._staged)

    # -- replay pipeline ------------------------------------------------------------------

    def _submit_staged(self, force: bool = False) -> None:
        with self._stage_lock:
            if self._frozen or not self._staged:
                return
            if not force and len(self._staged) < self.config.replay.stage_size:
                return
            batch, self._staged = self._staged, []
        self._replay_buffer.note_env_steps(self._steps)
        self._replay_writer.submit(batch)

    def freeze_replay_pipeline(self) -> AbstractContextManager[None]:
        """Freeze replay submission, flush actor-side staging, and drain the replay writer.

        Inside the block every transition taken so far is in the replay buffer and no
        insert happens; transitions the actor takes meanwhile stay staged.
        """
        return self._freeze()

    @contextmanager
    def _freeze(self) -> Iterator[None]:
        # One freeze at a time; a freeze nested on the same thread is already covered.
        with self._freeze_lock:
            self._freeze_depth += 1
            try:
                if self._freeze_depth > 1:
                    yield
                    return
                with self._stage_lock:
                    self._frozen += 1
                    batch, self._staged = self._staged, []
                try:
                    if batch:
                        self._replay_writer.submit(batch)
                    self._replay_writer.drain()
                    self._replay_writer.pause()
                    try:
                        yield
                    finally:
                        self._replay_writer.resume()
                finally:
                    with self._stage_lock:
                        self._frozen -= 1
            finally:
                self._freeze_depth -= 1

    def replace_replay_buffer(self, replay_buffer: ReplayBuffer) -> None:
        """Replace the replay buffer and reconnect the replay writer."""
        with self.freeze_replay_pipeline():
            self._replay_writer.set_buffer(replay_buffer)
            self._replay_buffer = replay_buffer

    # -- the algorithm's part of the loop ---------------------------------------------------

    def _on_episode_start(
        self, env: OakEmuMultiEnv, state: EnvironmentState, result: StepResult
    ) -> None:
        self.policy.select_and_enqueue_action(env, state.env_id, state, step=self._steps)

    def _choose_action(self, env: OakEmuMultiEnv, state: EnvironmentState) -> None:
        self.policy.select_and_enqueue_action(env, state.env_id, state, step=self._steps)

    def _record_step(
        self, state: EnvironmentState, result: StepResult, next_observation: npt.NDArray[Any]
    ) -> float:
        action = state.last_action
        assert action is not None and state.observation is not None
        shaped = self.reward_shaping(float(result.reward), result.info, state, next_observation)
        transition = Transition(
            state.env_id,
            state.observation,
            action,
            shaped,
            next_observation,
            self._learner_terminated(state, result),
            bool(result.truncated),
            state.episode_start,
        )
        with self._stage_lock:
            self._staged.append(transition)
        return shaped

    def _act_on_batch(
        self,
        env: OakEmuMultiEnv,
        observations: npt.NDArray[Any],
        batch: torch.Tensor,
        entries: list[int],
    ) -> None:
        self.policy.reset_noise_before_inference(self._steps, self.lifecycle.num_envs)
        with torch.inference_mode():
            actions = self.action_masker.greedy(self.actor_model(batch))
        for env_id, action in zip(entries, actions.tolist(), strict=True):
            self.policy.on_inference_complete(self.lifecycle[env_id], int(action))
            env.submit(env_id, int(action))
        self.policy.sync_weights_after_inference()

    def _after_batch(self, env: OakEmuMultiEnv) -> bool:
        self._submit_staged()
        gate = self.replay_ratio_gate
        gate.set_env_steps(self._steps)
        if gate.lag(self._steps) > gate.max_lag:
            self._submit_staged(force=True)  # what the learner waits for
            gate.actor_wait(self.context.stop_event)
        return True

    def _on_run_end(self) -> None:
        self._submit_staged(force=True)
        self.replay_ratio_gate.set_env_steps(self._steps)

    def _actor_scalars(self) -> dict[str, float]:
        scalars = {
            "replay/size": float(len(self._replay_buffer)),
            "replay/staged": float(self.staged_transition_count),
            "queue/replay_depth": float(self.replay_queue_depth),
            "perf/actor_wait_s": self.replay_ratio_gate.actor_wait_s,
        }
        if self._replay_buffer.n_step_start is not None:
            scalars["replay/n_step"] = float(self._replay_buffer.current_n_step)
        epsilon = self.policy.get_exploration_value(self._steps)
        if epsilon is not None:
            scalars["train/epsilon"] = epsilon
        total = self.policy.greedy_actions + self.policy.random_actions
        if total:
            scalars["actor/greedy_fraction"] = self.policy.greedy_actions / total
        return scalars

    # -- state ----------------------------------------------------------------------------

    def _extra_state(self) -> dict[str, Any]:
        return {
            "random_actions": self.policy.random_actions,
            "greedy_actions": self.policy.greedy_actions,
        } | self.exploration.state_dict()

    def _restore_extra(self, state: ActorRuntimeState) -> None:
        self.policy.random_actions = int(state.extra.get("random_actions", 0))
        self.policy.greedy_actions = int(state.extra.get("greedy_actions", 0))
        self.exploration.load_state_dict(state.extra)
        self.policy.invalidate_sync()
        self.replay_ratio_gate.set_env_steps(self._steps)
