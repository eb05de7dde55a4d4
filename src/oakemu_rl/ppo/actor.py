"""PPOActor: collects rollouts with the stochastic policy, env by env, with no lockstep."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from ..runtime.context import RuntimeContext
from ..runtime.env_lifecycle import ActorRuntimeState, EnvironmentState, EnvLifecycle
from ..runtime.episode_metrics import EpisodeMetrics, EpisodeTotals
from ..runtime.thread_safe_model import ThreadSafeModel
from ..trajectories.coordinator import TrajectoryEpisodeCoordinator
from ..trajectories.restart_pool import RestartPool
from .bc import BCMaterialisationSource, ReplayObservationCache
from .config import PPOExperimentConfiguration
from .handshake import RolloutHandshake
from .model import PPOModel
from .rollout_buffer import RolloutBuffer

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv, StepResult

__all__ = ["PPOActor", "make_multi_env"]

EpisodeObserver = Callable[[dict[str, float], int, bool], None]

# What a row of a `_select_actions` batch is for.
_ACT = 0  # choose, store and submit an action
_BOOTSTRAP = 1  # the env's column is full: only the value (GAE bootstrap); the env waits
_TRUNCATION = 2  # the value of a truncated step's final observation


def make_multi_env(
    config: PPOExperimentConfiguration, *, num_envs: int | None = None, seed_offset: int = 0
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
        batch_latency=env.batch_latency_s,
    )


@dataclass
class _Request:
    env_id: int
    kind: int
    row: int = -1


class PPOActor:
    """PPO actor that collects rollouts using the stochastic policy.

    Unlike the DQN Trainer, this does not use epsilon-greedy exploration or a replay
    buffer. It collects rollouts (observations, actions, log-probabilities, values,
    rewards, episode ends) into a RolloutBuffer, each env filling its own column as
    its results arrive (no lockstep). An env whose column is full waits - its next
    step is not submitted - until every column is full, the learner has trained on
    the rollout and released it through the RolloutHandshake; then every waiting env
    gets an action from the new weights.

    With `ppo.overlap_collection`, the envs do not wait for the learner: the full
    buffer is handed over and the actor goes on filling a second one with the weights
    it has, taking the new weights as soon as the learner releases the rollout. It
    waits only when the next rollout is full before the learner is done, and for
    rollouts that `hand_off_waits` names (the experiment's checkpoint steps).

    It does not inherit from Agent: PPO needs (action, log_prob, value) per step,
    so actions come from one `PPOModel.get_action_bundle` call per batch of ready
    envs (`_select_actions`). It composes EpisodeMetrics and EnvLifecycle instead.

    Args:
        context: The shared runtime context.
        actor_model: The local PPO model for action selection.
        learner_model: The learner model container (for weight sync).
        rollout_buffer: The rollout buffer to fill.
        rollout_handshake: Synchronizes rollout hand-off with the learner.
        episode_observer: Optional observer invoked with each completed episode's data:
            its scalars (`episode/return`, `episode/length`, ...), the env step, and
            whether the episode was won.
        replay_observation_cache: Optional shared replay observation cache.
        env_factory: Optional multi-environment factory; defaults to
            `_default_env_factory` (the configured game).
    """

    def __init__(
        self,
        context: RuntimeContext[PPOExperimentConfiguration],
        actor_model: PPOModel,
        learner_model: ThreadSafeModel[PPOModel],
        rollout_buffer: RolloutBuffer,
        rollout_handshake: RolloutHandshake,
        episode_observer: EpisodeObserver | None = None,
        replay_observation_cache: ReplayObservationCache | None = None,
        env_factory: Callable[[], OakEmuMultiEnv] | None = None,
    ) -> None:
        config = context.config
        if rollout_buffer.num_envs != config.env.num_envs:
            raise ValueError(
                f"the rollout buffer has {rollout_buffer.num_envs} columns; "
                f"env.num_envs is {config.env.num_envs}"
            )
        self.context = context
        self.config = config
        self.actor_model = actor_model
        self.learner_model = learner_model
        self.rollout_buffer = rollout_buffer
        self.rollout_handshake = rollout_handshake
        self.episode_observer = episode_observer
        self._replay_observation_cache = replay_observation_cache
        self._env_factory = env_factory
        self._env: OakEmuMultiEnv | None = None
        self.lifecycle = EnvLifecycle(config.env.num_envs, context.seed, "actor")
        self.episode_metrics = EpisodeMetrics()
        self._trajectory_runtime = TrajectoryEpisodeCoordinator()
        pool = config.restart_pool
        self._restart_pool = RestartPool(pool.capacity) if pool.enabled else None
        self._restart_rng = context.spawn_rng("restart_pool")
        self._bc_source: BCMaterialisationSource | None = None
        self.generator = torch.Generator().manual_seed(context.seed)
        self.total_steps = config.total_steps
        self._steps = 0
        self._synced_version = -1
        self._parked: list[int] = []
        self._batch_obs: npt.NDArray[Any] | None = None
        self._started = False
        self._perf_mark = (time.monotonic(), 0)
        self.env_steps_per_s = 0.0
        self.rollouts_collected = 0
        self._overlap = config.ppo.overlap_collection
        self._spare_buffer: RolloutBuffer | None = None
        self._synced_release = 0
        #: With overlapping collection: called with the step a rollout ends at; True makes
        #: the actor wait until the learner releases that rollout (consistent checkpoints).
        self.hand_off_waits: Callable[[int], bool] | None = None

    def _default_env_factory(self) -> OakEmuMultiEnv:
        return make_multi_env(self.config)

    # -- properties ---------------------------------------------------------------------

    @property
    def steps(self) -> int:
        """Get the total number of environment steps."""
        return self._steps

    @property
    def total_episodes(self) -> int:
        """Get the total number of episodes completed."""
        return self.episode_metrics.totals.total_episodes

    @property
    def total_wins(self) -> int:
        """Get the total number of wins."""
        return self.episode_metrics.totals.total_wins

    @property
    def total_losses(self) -> int:
        """Get the total number of losses."""
        return self.episode_metrics.totals.total_losses

    @property
    def total_truncated(self) -> int:
        """Get the total number of truncated episodes."""
        return self.episode_metrics.totals.total_truncated

    @property
    def result_queue_depth(self) -> int:
        """Get the current depth of the underlying environment result queue."""
        return int(self._env.result_queue_depth) if self._env is not None else 0

    @property
    def restart_pool(self) -> RestartPool | None:
        """Get the restart pool, or None when restarts are not configured."""
        return self._restart_pool

    @property
    def replay_observation_cache(self) -> ReplayObservationCache | None:
        """Get the replay observation cache shared with the learner-side BC sampler, if enabled."""
        return self._replay_observation_cache

    @property
    def trajectory_runtime(self) -> TrajectoryEpisodeCoordinator:
        """Get the trajectory coordinator shared with the learner-side BC sampler."""
        return self._trajectory_runtime

    @property
    def bc_materialisation_source(self) -> BCMaterialisationSource | None:
        """The attached BC materialisation source, if any."""
        return self._bc_source

    @property
    def env(self) -> OakEmuMultiEnv | None:
        """The multi-env, once opened."""
        return self._env

    @property
    def parked_envs(self) -> int:
        """Envs whose column is full, waiting for the learner to release the rollout."""
        return len(self._parked)

    # -- methods ------------------------------------------------------------------------

    def set_bc_materialisation_source(self, source: BCMaterialisationSource | None) -> None:
        """Attach the learner-side BC sampler's materialisation queue.

        Args:
            source: The request source, or None to disable materialisation.
        """
        self._bc_source = source

    def runtime_state(self) -> ActorRuntimeState:
        """The actor's counters, episode statistics, trajectories and RNG states."""
        sampler = base64.b64encode(self.generator.get_state().numpy().tobytes()).decode()
        return ActorRuntimeState(
            steps=self._steps,
            totals=EpisodeTotals(**self.episode_metrics.totals.to_dict()),
            episode_metrics=self.episode_metrics.state_dict(),
            trajectory=self._trajectory_runtime.state_dict(),
            rng_states={
                "envs": self.lifecycle.rng_states(),
                "sampler": sampler,
                "restart": dict(self._restart_rng.bit_generator.state),
            },
            extra={"rollouts": self.rollouts_collected},
        )

    def restore_runtime_state(self, state: ActorRuntimeState) -> None:
        """Restore checkpointed actor counters and trajectory runtime state.

        Not named restore_state (unlike the old Agent.restore_state): the actor
        restores a strictly wider payload than the base episode-totals state, so this
        is a distinct method rather than an incompatibly-typed override.

        Args:
            state: The actor runtime state to restore.
        """
        self._steps = int(state.steps)
        if state.episode_metrics:
            self.episode_metrics.load_state_dict(state.episode_metrics)
        self.episode_metrics.restore_totals(state.totals)
        self._trajectory_runtime.load_state_dict(state.trajectory)
        rngs = state.rng_states
        if rngs.get("envs"):
            self.lifecycle.set_rng_states(rngs["envs"])
        if rngs.get("sampler"):
            raw = np.frombuffer(base64.b64decode(rngs["sampler"]), dtype=np.uint8).copy()
            self.generator.set_state(torch.from_numpy(raw))
        if rngs.get("restart"):
            self._restart_rng.bit_generator.state = rngs["restart"]
        self.rollouts_collected = int(state.extra.get("rollouts", 0))
        self._synced_version = -1

    # -- env ----------------------------------------------------------------------------

    def _open_env(self) -> OakEmuMultiEnv:
        if self._env is None:
            env = (self._env_factory or self._default_env_factory)()
            if env.num_envs != self.lifecycle.num_envs:
                env.close()
                raise ValueError(
                    f"the env factory made {env.num_envs} envs; expected {self.lifecycle.num_envs}"
                )
            shape = tuple(env.observation_space.shape)
            if shape != self.rollout_buffer.observation_shape:
                env.close()
                raise ValueError(
                    f"the envs' observations have shape {shape}; the rollout buffer expects "
                    f"{self.rollout_buffer.observation_shape}"
                )
            self._env = env
        return self._env

    def _close_env(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    def _request_reset(self, env: OakEmuMultiEnv, state: EnvironmentState) -> None:
        machine_state: bytes | None = None
        pool = self._restart_pool
        if (
            pool is not None
            and len(pool)
            and self._restart_rng.random() < self.config.restart_pool.restart_probability
        ):
            entry = pool.sample(self._restart_rng)
            machine_state = entry.state if entry is not None else None
        self.lifecycle.request_reset(env, state, machine_state)

    def _sync_weights(self) -> None:
        version = self.learner_model.copy_to(self.actor_model, self._synced_version)
        if version is not None:
            self._synced_version = version

    def _sync_released_weights(self) -> None:
        """Take the learner's weights once it has released a rollout (overlapping mode:
        between a release and the next hand-over the learner does not change them)."""
        releases = self.rollout_handshake.releases
        if releases != self._synced_release:
            self._synced_release = releases
            self._sync_weights()

    # -- main loop ----------------------------------------------------------------------

    def run(self) -> None:
        """Main loop for the PPO Trainer.

        Collects rollouts by stepping the environments (each as soon as its previous
        step is done) and storing transitions in the rollout buffer. When the buffer is
        full, signals the learner and waits for it. Returns when `total_steps` is
        reached or the run is stopped.
        """
        self.context.enter_thread()
        env = self._open_env()
        stop = self.context.stop_event
        self._sync_weights()
        self._synced_release = self.rollout_handshake.releases
        if not self._started:
            self._started = True
            self._trajectory_runtime.discard_active()
            self.rollout_buffer.reset()
            self._parked.clear()
            for state in self.lifecycle.states:
                self._request_reset(env, state)
        self._perf_mark = (time.monotonic(), self._steps)
        try:
            while not stop.is_set() and self._steps < self.total_steps:
                if self._overlap:
                    self._sync_released_weights()
                requests: list[_Request] = []
                for result in self._poll(env):
                    self._handle(env, result, requests)
                self._select_actions(env, requests)
                if self.rollout_buffer.full and not self._hand_off(env):
                    break
            if self._overlap:
                self.rollout_handshake.wait_for_release()  # the last rollout is trained on
        finally:
            self._close_env()

    def _poll(self, env: OakEmuMultiEnv) -> list[StepResult]:
        """The results ready now; when they are few, wait briefly for more (`batch_wait_s`),
        so that one inference pass serves several envs."""
        results = env.poll(timeout=0.1)
        wait = self.config.env.batch_wait_s
        if wait > 0 and results:
            deadline = time.monotonic() + wait
            while len(results) < env.in_flight:  # fewer than half of the busy envs
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                results += env.poll(timeout=remaining)
        return results

    def _hand_off(self, env: OakEmuMultiEnv) -> bool:
        """Give the full rollout to the learner, wait (unless collection overlaps training),
        then resume the waiting envs."""
        self.rollouts_collected += 1
        handshake = self.rollout_handshake
        full = self.rollout_buffer
        full.end_step = self._steps
        if not self._overlap:
            if not handshake.submit_and_wait(rollout=full):
                return False
            self._sync_weights()
        else:
            if not handshake.wait_for_release():  # the learner is done with the previous one
                return False
            self._sync_released_weights()
            # Asked before the hand-over: the learner's hook for this rollout may run soon after.
            waits = self.hand_off_waits is not None and self.hand_off_waits(self._steps)
            handshake.signal_full(full)
            if waits:
                if not handshake.wait_for_release():
                    return False
                self._sync_released_weights()
            else:
                spare = self._spare_buffer if self._spare_buffer is not None else full.empty_like()
                self._spare_buffer, self.rollout_buffer = full, spare
        self.rollout_buffer.reset()
        parked, self._parked = self._parked, []
        requests: list[_Request] = []
        for env_id in parked:
            state = self.lifecycle[env_id]
            assert state.observation is not None
            self._stage(env_id, state.observation, len(requests))
            requests.append(_Request(env_id, _ACT))
        self._select_actions(env, requests)
        return True

    def _stage(self, env_id: int, observation: npt.NDArray[Any], index: int) -> None:
        """Copy an observation into row `index` of the next inference batch."""
        if self._batch_obs is None:
            self._batch_obs = np.empty(
                (self.lifecycle.num_envs, *observation.shape), dtype=observation.dtype
            )
        self._batch_obs[index] = observation

    def _handle(self, env: OakEmuMultiEnv, result: StepResult, requests: list[_Request]) -> None:
        env_id = result.env_id
        state = self.lifecycle[env_id]
        buffer = self.rollout_buffer
        if result.is_reset or state.awaiting_reset:
            state.begin_episode(result.observation, result.info)
            self._trajectory_runtime.begin_episode(
                env_id, start_point=state.start_point, seed=state.episode_seed
            )
            if buffer.column_full(env_id):
                self._parked.append(env_id)  # its last step ended an episode: no bootstrap
            else:
                self._stage(env_id, result.observation, len(requests))
                requests.append(_Request(env_id, _ACT))
            return
        if result.info.get("worker_lost"):
            # Not a real step: the action in flight was lost with its worker. The step
            # before it is cut off there, bootstrapping from its successor's value.
            if buffer.has_pending_action(env_id):
                t = int(buffer.positions[env_id])
                value = float(buffer.values[t, env_id])
                buffer.discard_pending_action(env_id)
                row = buffer.truncate_last(env_id)
                if row is not None:
                    buffer.set_truncation_value(env_id, row, value)
            self._end_episode(env, state, "truncated")
            return

        reward = float(result.reward) * self.config.ppo.reward_scale
        clip = self.config.ppo.reward_clip
        if clip is not None:
            reward = min(max(reward, -clip), clip)
        terminated, truncated = bool(result.terminated), bool(result.truncated)
        row = buffer.add_outcome(env_id, reward, terminated, truncated)
        action = state.last_action
        assert action is not None
        self._trajectory_runtime.record_step(env_id, action, float(result.reward))
        self.lifecycle.on_step(state, result, reward)
        self._steps += 1
        if terminated or truncated:
            if truncated and not terminated:
                self._stage(env_id, result.observation, len(requests))
                requests.append(_Request(env_id, _TRUNCATION, row))
            outcome = result.info.get("outcome") or ("loss" if terminated else "truncated")
            self._end_episode(env, state, str(outcome))
        else:
            self._maybe_save_restart_state(env, state)
            state.observation = np.array(result.observation, copy=True)
            self._stage(env_id, state.observation, len(requests))
            if buffer.column_full(env_id):
                self._parked.append(env_id)
                requests.append(_Request(env_id, _BOOTSTRAP))
            else:
                requests.append(_Request(env_id, _ACT))
        if self._steps % self.config.logging.log_every_steps == 0:
            self._log_actor_metrics(self._steps)

    def _select_actions(self, env: OakEmuMultiEnv, requests: list[_Request]) -> None:
        """One `get_action_bundle` call for every ready env of this batch."""
        if not requests:
            return
        assert self._batch_obs is not None
        count = len(requests)
        observations = torch.from_numpy(self._batch_obs[:count]).to(self.context.device)
        with torch.inference_mode():
            bundle = self.actor_model.get_action_bundle(observations, generator=self.generator)
        actions = bundle.actions.cpu().numpy()
        log_probs = bundle.log_probs.float().cpu().numpy()
        values = bundle.values.float().cpu().numpy()
        buffer = self.rollout_buffer
        with env.batch():  # one message per worker for the whole batch
            for i, request in enumerate(requests):
                env_id = request.env_id
                if request.kind == _ACT:
                    action = int(actions[i])
                    buffer.add_action(env_id, self._batch_obs[i], action, log_probs[i], values[i])
                    self.lifecycle[env_id].last_action = action
                    env.submit(env_id, action)
                elif request.kind == _BOOTSTRAP:
                    buffer.set_last_value(env_id, float(values[i]))
                else:
                    buffer.set_truncation_value(env_id, request.row, float(values[i]))

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
        if self.episode_observer is not None:
            self.episode_observer(scalars, self._steps, outcome == "win")
        self._request_reset(env, state)

    def _maybe_save_restart_state(self, env: OakEmuMultiEnv, state: EnvironmentState) -> None:
        pool = self._restart_pool
        if pool is None or state.episode_length % self.config.restart_pool.save_every_steps:
            return
        machine_state = env.save_state(state.env_id)
        pool.add(
            machine_state,
            episode_return=state.episode_return,
            episode_step=state.episode_length,
            seed=state.episode_seed,
        )

    def _log_actor_metrics(self, step: int) -> None:
        now = time.monotonic()
        mark_time, mark_steps = self._perf_mark
        if now > mark_time:
            self.env_steps_per_s = (step - mark_steps) / (now - mark_time)
        self._perf_mark = (now, step)
        sink = self.context.metrics
        sink.scalar("perf/env_steps_per_s", self.env_steps_per_s, step)
        sink.scalar("perf/actor_wait_s", self.rollout_handshake.actor_wait_s, step)
        sink.scalar("queue/result_depth", self.result_queue_depth, step)
        sink.scalar("actor/parked_envs", float(len(self._parked)), step)
        if self._restart_pool is not None:
            sink.scalar("restart_pool/size", float(len(self._restart_pool)), step)
