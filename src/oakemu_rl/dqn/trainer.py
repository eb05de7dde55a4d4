"""Trainer: the DQN actor. Steps the envs, chooses actions, stages transitions for replay."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from ..runtime.agent import Agent
from ..runtime.context import RuntimeContext
from ..runtime.env_lifecycle import ActorRuntimeState, EnvironmentState
from ..runtime.thread_safe_model import ThreadSafeModel
from ..trajectories.coordinator import TrajectoryEpisodeCoordinator
from .action_masker import ActionMasker
from .action_policy import ActionPolicy
from .config import DQNExperimentConfiguration
from .exploration import ExplorationStrategy, NoisyNetExploration
from .model import DQNModel
from .replay_buffer import ReplayBuffer, Transition
from .replay_writer import ReplayWriter
from .reward_shaping import RewardShapingPipeline

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv, StepResult
    from .learner import ReplayRatioGate

StepHook = Callable[[int], None]


def make_multi_env(
    config: DQNExperimentConfiguration, *, num_envs: int | None = None, seed_offset: int = 0
) -> OakEmuMultiEnv:
    """The multi-env a configuration describes."""
    from ..envs.multi_env import OakEmuMultiEnv

    env = config.env
    return OakEmuMultiEnv(
        config.game,
        num_envs=num_envs or env.num_envs,
        num_workers=env.num_workers,
        backend=env.backend,
        seed=config.seed + seed_offset,
        observation_config=env.observation,
        worker_nice=env.worker_nice,
    )


class Trainer(Agent[DQNExperimentConfiguration]):
    """Trainer component responsible for interacting with the environment and collecting
    transitions.

    Results arrive in the order envs finish. For each, the ActionPolicy either submits
    an action at once (warm-up, exploration) or queues the env for batched greedy
    inference; after the batch, the actor model syncs with the learner. Every step
    becomes a transition, shaped by the reward-shaping pipeline and staged per env;
    staged batches go to the ReplayWriter thread.

    Args:
        context: The shared runtime context.
        actor_model: The local DQN model for action selection.
        learner_model: The learner model container (for weight sync).
        replay_buffer: The experience replay buffer.
        replay_writer: Dedicated replay-writer runtime for replay inserts.
        reward_shaping: Optional actor-owned reward-shaping pipeline.
        env_factory: Optional multi-environment factory; see Agent. Defaults to the
            configured game.
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
        config = context.config
        super().__init__(context, actor_model, config.env.num_envs, env_factory, stream="actor")
        self.config = config
        self.actor_model = actor_model
        self.learner_model = learner_model
        self._replay_buffer = replay_buffer
        self._replay_writer = replay_writer
        self.reward_shaping = reward_shaping or RewardShapingPipeline()
        self.action_masker = ActionMasker(actor_model.num_actions, config.env.allowed_actions)
        self.exploration = ExplorationStrategy.from_settings(config.exploration)
        self._trajectory_runtime = TrajectoryEpisodeCoordinator()
        self.policy = ActionPolicy(
            self.action_masker,
            self.exploration,
            actor_model,
            learner_model,
            config.learner.learning_starts,
            queue_for_inference=self._queue_for_inference,
            record_random_step=self._trajectory_runtime.record_random_step,
        )
        self.total_steps = config.total_steps
        self.gate: ReplayRatioGate | None = None
        self._staged: list[Transition] = []
        self._stage_lock = threading.Lock()
        self._frozen = 0
        self._freeze_lock = threading.RLock()
        self._freeze_depth = 0
        self._hooks: list[tuple[int, StepHook]] = []
        self._started = False
        self._perf_mark = (time.monotonic(), 0)
        self.env_steps_per_s = 0.0

    def _default_env_factory(self) -> OakEmuMultiEnv:
        return make_multi_env(self.config)

    # -- properties -----------------------------------------------------------------------

    @property
    def replay_buffer(self) -> ReplayBuffer:
        """Get the replay buffer."""
        return self._replay_buffer

    @property
    def replay_writer(self) -> ReplayWriter:
        return self._replay_writer

    @property
    def replay_queue_depth(self) -> int:
        """Get the number of replay batches waiting to be inserted."""
        return self._replay_writer.queue_depth

    @property
    def staged_transition_count(self) -> int:
        """Get the number of transitions currently staged on the actor."""
        return len(self._staged)

    @property
    def trajectory_runtime(self) -> TrajectoryEpisodeCoordinator:
        """Get the shared trajectory runtime coordinator."""
        return self._trajectory_runtime

    # -- replay pipeline ------------------------------------------------------------------

    def _stage(self, transition: Transition) -> None:
        with self._stage_lock:
            self._staged.append(transition)

    def _submit_staged(self, force: bool = False) -> None:
        with self._stage_lock:
            if self._frozen or not self._staged:
                return
            if not force and len(self._staged) < self.config.replay.stage_size:
                return
            batch, self._staged = self._staged, []
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

    # -- hooks ----------------------------------------------------------------------------

    def add_step_hook(self, every: int, hook: StepHook) -> None:
        """Call `hook(step)` on the actor thread whenever the step count reaches a multiple
        of `every` (exactly at that step, between two results)."""
        if every < 1:
            raise ValueError("every must be at least 1")
        self._hooks.append((every, hook))

    # -- inference hooks ------------------------------------------------------------------

    def _greedy_actions(self, q_values: torch.Tensor) -> npt.NDArray[np.int64]:
        return self.action_masker.greedy(q_values)

    def _before_inference_flush(self, count: int) -> None:
        self.policy.reset_noise_before_inference(self._steps, self.lifecycle.num_envs)

    def _on_inference_complete(self, env_id: int, action: int) -> None:
        assert self._env is not None
        self.policy.on_inference_complete(self.lifecycle[env_id], action)
        self._env.submit(env_id, action)

    def _after_inference_flush(self) -> None:
        self.policy.sync_weights_after_inference()

    # -- main loop ------------------------------------------------------------------------

    def run(self) -> None:
        """Main loop for the Trainer, interacting with the environment and adding data to
        the replay buffer. Returns when `total_steps` is reached or the run is stopped."""
        context = self.context
        context.enter_thread()
        env = self._open_env()
        stop = context.stop_event
        if not self._started:
            self._started = True
            self._trajectory_runtime.discard_active()
            self.lifecycle.reset_all(env)
        self._perf_mark = (time.monotonic(), self._steps)
        try:
            while not stop.is_set() and self._steps < self.total_steps:
                for result in env.poll(timeout=0.1):
                    self._handle(env, result)
                    if self._steps >= self.total_steps or stop.is_set():
                        break
                self._flush_pending_inference()
                self._submit_staged()
                if self.gate is not None:
                    self.gate.set_env_steps(self._steps)
                    if (
                        self.gate.target_updates(self._steps) - self.gate.updates
                        > self.gate.max_lag
                    ):
                        self._submit_staged(force=True)
                        self.gate.actor_wait(stop)
        finally:
            self._submit_staged(force=True)
            if self.gate is not None:
                self.gate.set_env_steps(self._steps)
            self._close_env()
            self._started = False  # a later run() starts its episodes afresh

    def _handle(self, env: OakEmuMultiEnv, result: StepResult) -> None:
        state = self.lifecycle[result.env_id]
        if result.is_reset or state.awaiting_reset:
            state.begin_episode(result.observation, result.info)
            self._trajectory_runtime.begin_episode(
                state.env_id, start_point=state.start_point, seed=state.episode_seed
            )
            self.policy.select_and_enqueue_action(env, state.env_id, state, step=self._steps)
            return
        if result.info.get("worker_lost"):
            # Not a real step: the episode was lost with its worker. Count it truncated.
            self._end_episode(env, state, "truncated")
            return
        action = state.last_action
        assert action is not None and state.observation is not None
        shaped = self.reward_shaping(float(result.reward), result.info, state)
        next_observation = np.array(result.observation, copy=True)
        self._stage(
            Transition(
                state.env_id,
                state.observation,
                action,
                shaped,
                next_observation,
                bool(result.terminated),
                bool(result.truncated),
                state.episode_start,
            )
        )
        self._trajectory_runtime.record_step(state.env_id, action, float(result.reward))
        self.lifecycle.on_step(state, result, shaped)
        self._steps += 1
        if result.terminated or result.truncated:
            outcome = result.info.get("outcome") or ("loss" if result.terminated else "truncated")
            self._end_episode(env, state, str(outcome))
        else:
            state.observation = next_observation
            self.policy.select_and_enqueue_action(env, state.env_id, state, step=self._steps)
        step = self._steps
        if step % self.config.logging.log_every_steps == 0:
            self._log_actor_metrics(step)
        for every, hook in self._hooks:
            if step % every == 0:
                hook(step)

    def _end_episode(self, env: OakEmuMultiEnv, state: EnvironmentState, outcome: str) -> None:
        scalars = self.episode_metrics.record(
            episode_return=state.episode_return,
            length=state.episode_length,
            score=state.last_score,
            outcome=outcome,
            step=self._steps,
            shaped_return=state.shaped_return,
        )
        self._trajectory_runtime.end_episode(
            state.env_id,
            outcome=outcome,
            episode_return=state.episode_return,
            score=state.last_score,
            step=self._steps,
        )
        for name, value in scalars.items():
            self.context.metrics.scalar(name, value, self._steps)
        self.lifecycle.request_reset(env, state)

    def _log_actor_metrics(self, step: int) -> None:
        now = time.monotonic()
        mark_time, mark_steps = self._perf_mark
        if now > mark_time:
            self.env_steps_per_s = (step - mark_steps) / (now - mark_time)
        self._perf_mark = (now, step)
        sink = self.context.metrics
        epsilon = self.policy.get_exploration_value(step)
        if epsilon is not None:
            sink.scalar("train/epsilon", epsilon, step)
        sink.scalar("perf/env_steps_per_s", self.env_steps_per_s, step)
        sink.scalar("replay/size", len(self._replay_buffer), step)
        sink.scalar("replay/staged", self.staged_transition_count, step)
        sink.scalar("queue/result_depth", self.result_queue_depth, step)
        sink.scalar("queue/replay_depth", self.replay_queue_depth, step)
        total = self.policy.greedy_actions + self.policy.random_actions
        if total:
            sink.scalar("actor/greedy_fraction", self.policy.greedy_actions / total, step)
        if self.gate is not None:
            sink.scalar("perf/actor_wait_s", self.gate.actor_wait_s, step)

    # -- state ----------------------------------------------------------------------------

    def runtime_state(self) -> ActorRuntimeState:
        """The trainer's counters, episode statistics, trajectories and RNG states."""
        extra: dict[str, Any] = {
            "random_actions": self.policy.random_actions,
            "greedy_actions": self.policy.greedy_actions,
        }
        if isinstance(self.exploration, NoisyNetExploration):
            extra["noise_reset_step"] = self.exploration._last_reset_step
        return ActorRuntimeState(
            steps=self._steps,
            totals=self.episode_metrics.totals,
            episode_metrics=self.episode_metrics.state_dict(),
            trajectory=self._trajectory_runtime.state_dict(),
            rng_states={"envs": self.lifecycle.rng_states()},
            extra=extra,
        )

    def restore_runtime_state(self, state: ActorRuntimeState) -> None:
        """Restore checkpointed trainer counters and trajectory runtime state."""
        self._steps = int(state.steps)
        if state.episode_metrics:
            self.episode_metrics.load_state_dict(state.episode_metrics)
        self.restore_state(state.totals)
        self._trajectory_runtime.load_state_dict(state.trajectory)
        env_rngs = state.rng_states.get("envs")
        if env_rngs:
            self.lifecycle.set_rng_states(env_rngs)
        self.policy.random_actions = int(state.extra.get("random_actions", 0))
        self.policy.greedy_actions = int(state.extra.get("greedy_actions", 0))
        if isinstance(self.exploration, NoisyNetExploration):
            self.exploration._last_reset_step = state.extra.get("noise_reset_step")
        self.policy.invalidate_sync()
        if self.gate is not None:
            self.gate.set_env_steps(self._steps)
