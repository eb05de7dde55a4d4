"""ActorBase: env stepping, batched inference and episode bookkeeping for every algorithm.

An actor consumes the results of its multi-env in the order envs finish them (no
lockstep) and produces actions. This base owns what DQN's `Trainer` and PPO's
`PPOActor` share:

- the multi-env and one `EnvironmentState` per env, each with its own RNG stream;
- episodes: their start (from the game's start, or from a restart-pool state), their
  steps, their end (outcome, `episode/*` scalars, the trajectory record);
- batched inference: envs that need the model are queued with `_queue_for_inference`
  and served by one forward pass per poll (`_act_on_batch`);
- counters, actor scalars and the runtime state a checkpoint keeps (the reward-shaping
  pipeline's statistics among it);
- with `episodic_life`, which steps end bootstrapping for the learner
  (`_learner_terminated`).

An algorithm says what a step means to it through a few hooks: `_on_episode_start`,
`_record_step`, `_choose_action`, `_on_final_step`, `_on_worker_lost`, `_act_on_batch`,
`_after_batch`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from ..envs.lives import lives_lost
from ..trajectories.backplay import Backplay, HandOver
from ..trajectories.coordinator import TrajectoryEpisodeCoordinator
from ..trajectories.restart_pool import RestartPool
from .config_base import ExperimentConfiguration
from .context import RuntimeContext
from .env_lifecycle import ActorRuntimeState, EnvironmentState, EnvLifecycle
from .env_owner import EnvFactory, EnvOwner, make_multi_env
from .episode_metrics import EpisodeMetrics, EpisodeTotals
from .inference_batch import InferenceBatch
from .reward_shaping import RewardShapingPipeline
from .thread_safe_model import ThreadSafeModel

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv, StepResult

C = TypeVar("C", bound=ExperimentConfiguration)
E = TypeVar("E")

StepHook = Callable[[int], None]
"""Called with the env step count (see `ActorBase.add_step_hook`)."""

EpisodeObserver = Callable[[dict[str, float], int, bool], None]
"""Called with a finished episode's scalars, the env step and whether it was won."""


class ActorBase(ABC, Generic[C, E]):
    """Steps the envs of a run and keeps their episodes; the algorithm chooses the actions.

    Args:
        context: the run's context (configuration, device, metrics, stop event, seed).
        actor_model: the model that chooses actions (a copy of the learner's).
        learner_model: the learner model's container, where new weights come from.
        env_factory: builds the multi-env (default: the configured game).
        episode_observer: called with each finished episode (see `EpisodeObserver`).
    """

    def __init__(
        self,
        context: RuntimeContext[C],
        actor_model: nn.Module,
        learner_model: ThreadSafeModel[Any],
        env_factory: EnvFactory | None = None,
        episode_observer: EpisodeObserver | None = None,
    ) -> None:
        config = context.config
        num_envs = config.env.num_envs
        self.context = context
        self.config = config
        self.actor_model = actor_model
        self.learner_model = learner_model
        self.episode_observer = episode_observer
        self.total_steps = config.total_steps
        self._envs = EnvOwner(
            env_factory or (lambda: make_multi_env(config)), num_envs, self._check_env
        )
        self.lifecycle = EnvLifecycle(num_envs, context.seed, "actor")
        self.episode_metrics = EpisodeMetrics()
        self._trajectory_runtime = TrajectoryEpisodeCoordinator()
        pool = config.restart_pool
        self._restart_pool = (
            RestartPool(
                pool.capacity,
                priority=pool.priority,
                max_bytes=pool.max_bytes,
                visits=self._novelty_visits,
            )
            if pool.enabled
            else None
        )
        self._restart_rng = context.spawn_rng("restart_pool")
        self._restarted_episodes = 0
        self._backplay_episodes = 0
        self.first_win: dict[str, float] | None = None
        """The first win of an episode from the game's start: its env step and `clock()`."""
        created = time.monotonic()
        self.clock: Callable[[], float] = lambda: time.monotonic() - created
        """Seconds of training so far (the experiment sets its own, which spans sessions)."""
        self._restart_starts: list[tuple[float, float | None]] = []  # (step, progress)
        demonstrations = context.demonstrations
        demos = config.demos
        self._backplay = (
            Backplay(demonstrations, demos.backplay_threshold, demos.backplay_window)
            if demonstrations is not None and demos.backplay
            else None
        )
        if self._restart_pool is not None and demonstrations is not None and demos.restart_states:
            progress = pool.progress_variable
            for demo in demonstrations:
                saved = demonstrations.states(demo.id)
                for step, state, collected, values in zip(
                    saved.steps, saved.states, saved.returns, saved.values, strict=True
                ):
                    self._restart_pool.add(
                        state,
                        episode_return=collected,
                        episode_step=step,
                        progress=None if progress is None else values.get(progress),
                        source="demo",
                    )
        self._worker_restarts = 0  # by the multi-envs of earlier `run` calls and sessions
        self.reward_shaping = RewardShapingPipeline()
        """Shapes each step's reward before the learner sees it (the algorithm sets it)."""
        self._inference: InferenceBatch[E] = InferenceBatch(num_envs)
        self._step_hooks: list[tuple[int, StepHook]] = []
        self._steps = 0
        self._started = False
        self._perf_mark = (time.monotonic(), 0)
        self.env_steps_per_s = 0.0

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
        return self._envs.result_queue_depth

    @property
    def worker_restarts(self) -> int:
        """Get how many env worker processes were restarted after a fault, over the run."""
        env = self._envs.env
        return self._worker_restarts + (env.worker_restarts if env is not None else 0)

    @property
    def trajectory_runtime(self) -> TrajectoryEpisodeCoordinator:
        """Get the trajectory coordinator that records this actor's episodes."""
        return self._trajectory_runtime

    @property
    def restart_pool(self) -> RestartPool | None:
        """Get the restart pool, or None when restarts are not configured."""
        return self._restart_pool

    @property
    def backplay(self) -> Backplay | None:
        """Get the backplay schedule, or None without demonstrations or backplay."""
        return self._backplay

    @property
    def env(self) -> OakEmuMultiEnv | None:
        """The multi-env, while `run` is running."""
        return self._envs.env

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> None:
        """Step the envs until `total_steps` is reached or the run is stopped.

        Each call opens the envs and starts fresh episodes; counters carry on.
        """
        context = self.context
        context.enter_thread()
        env = self._envs.open()
        stop = context.stop_event
        try:
            if not self._started:
                self._started = True
                self._trajectory_runtime.discard_active()
                self._start_episodes(env)
            self._perf_mark = (time.monotonic(), self._steps)
            while not stop.is_set() and self._steps < self.total_steps:
                for result in self._poll(env):
                    self._handle(env, result)
                    if self._steps >= self.total_steps or stop.is_set():
                        break
                self._flush_inference(env)
                if not self._after_batch(env):
                    break
            self._after_loop()
        finally:
            self._on_run_end()
            self._worker_restarts = self.worker_restarts
            self._envs.close()
            self._started = False

    def _start_episodes(self, env: OakEmuMultiEnv) -> None:
        """Reset every env (a restart-pool state may replace the game's start)."""
        for state in self.lifecycle.states:
            self._request_reset(env, state)

    def _poll(self, env: OakEmuMultiEnv) -> list[StepResult]:
        """The results ready now; when they are few, wait briefly for more
        (`env.batch_wait_s`), so that one inference pass serves several envs."""
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

    def _handle(self, env: OakEmuMultiEnv, result: StepResult) -> None:
        state = self.lifecycle[result.env_id]
        if result.is_reset or state.awaiting_reset:
            state.begin_episode(result.observation, result.info)
            if self.config.episodic_life and state.last_lives is None:
                raise ValueError(
                    f"episodic_life: {self.config.game} reports no `lives` (a game YAML needs "
                    "a `lives` variable under `data`); set episodic_life: false"
                )
            start_state, start_step = state.extra.get("start_state"), 0
            if start_state is not None:
                start_step = int(state.extra.get("start_step", 0))
            self._trajectory_runtime.begin_episode(
                state.env_id,
                start_point=state.start_point,
                seed=state.episode_seed,
                start_state=start_state,
                start_step=start_step,
            )
            self._on_episode_start(env, state, result)
            return
        if result.info.get("worker_lost"):
            # Not a real step: the episode was lost with its worker. Count it truncated.
            self._on_worker_lost(state)
            self._end_episode(env, state, "truncated")
            return
        action = state.last_action
        assert action is not None, f"env {state.env_id} stepped without an action"
        next_observation = np.array(result.observation, copy=True)
        learned_reward = self._record_step(state, result, next_observation)
        self._trajectory_runtime.record_step(state.env_id, action, float(result.reward))
        self.lifecycle.on_step(state, result, learned_reward, self.reward_shaping.last_terms)
        self._steps += 1
        if result.terminated or result.truncated:
            self._on_final_step(state, result)
            outcome = result.info.get("outcome") or ("loss" if result.terminated else "truncated")
            self._end_episode(env, state, str(outcome))
        else:
            self._save_restart_state(env, state, result.info, next_observation)
            state.observation = next_observation
            if state.random_control:
                left = int(state.extra.get("random_left", 0)) - 1
                state.extra["random_left"] = left
                state.random_control = left > 0
            self._choose_action(env, state)
        step = self._steps
        if step % self.config.logging.log_every_steps == 0:
            self._log_actor_metrics(step)
        self._on_step_done(step)

    def _end_episode(self, env: OakEmuMultiEnv, state: EnvironmentState, outcome: str) -> None:
        scalars = self.episode_metrics.record(
            episode_return=state.episode_return,
            length=state.episode_length,
            score=state.last_score,
            outcome=outcome,
            step=self._steps,
            shaped_return=state.shaped_return,
            reward_terms=state.reward_terms,
        )
        self._trajectory_runtime.end_episode(
            state.env_id,
            outcome=outcome,
            episode_return=state.episode_return,
            score=state.last_score,
            step=self._steps,
            lives_lost=state.lives_lost,
        )
        if outcome == "win" and state.start_point == "initial" and self.first_win is None:
            self.first_win = {"step": float(self._steps), "seconds": self.clock()}
        hand_over: HandOver | None = state.extra.pop("hand_over", None)
        if hand_over is not None and self._backplay is not None:
            self._backplay.report(
                hand_over, won=outcome == "win", episode_return=state.episode_return
            )
        restart_id = state.extra.pop("restart_id", None)
        if restart_id is not None and self._restart_pool is not None:
            self._restart_pool.report(restart_id, failed=outcome == "loss" or state.lives_lost > 0)
        for name, value in scalars.items():
            self.context.metrics.scalar(name, value, self._steps)
        if self.episode_observer is not None:
            self.episode_observer(scalars, self._steps, outcome == "win")
        self._request_reset(env, state)

    # -- restarts -----------------------------------------------------------------------

    def _request_reset(self, env: OakEmuMultiEnv, state: EnvironmentState) -> None:
        """Start a new episode: at a demonstration's backplay hand-over point, or from a
        restart-pool state, each with its configured probability; else from the game's
        start."""
        machine_state: bytes | None = None
        start_point = "initial"
        state.extra.pop("hand_over", None)
        state.extra.pop("restart_id", None)
        state.extra.pop("start_state", None)
        state.random_control = False
        rng = self._restart_rng
        demos = self.config.demos
        pool = self._restart_pool
        if self._backplay is not None and rng.random() < demos.backplay_probability:
            hand_over = self._backplay.sample(rng)
            machine_state, start_point = hand_over.state, "backplay"
            state.extra["hand_over"] = hand_over
            state.extra["start_step"] = hand_over.step
            self._backplay_episodes += 1
            if demos.random_steps > 0:
                state.random_control = True
                state.extra["random_left"] = demos.random_steps
        elif (
            pool is not None
            and len(pool)
            and rng.random() < self.config.restart_pool.restart_probability
        ):
            entry = pool.sample(rng)
            if entry is not None:
                machine_state, start_point = entry.state, "restart"
                state.extra["restart_id"] = entry.id
                state.extra["start_step"] = entry.episode_step
                self._restarted_episodes += 1
                self._restart_starts.append((float(entry.episode_step), entry.progress))
        if machine_state is not None:
            state.extra["start_state"] = machine_state
        self.lifecycle.request_reset(env, state, machine_state)
        state.start_point = start_point

    def _novelty_visits(self, cell: int) -> int:
        novelty = self.reward_shaping.novelty
        return 0 if novelty is None else novelty.visits(cell)

    def _save_restart_state(
        self,
        env: OakEmuMultiEnv,
        state: EnvironmentState,
        info: dict[str, Any],
        observation: npt.NDArray[Any],
    ) -> None:
        pool = self._restart_pool
        settings = self.config.restart_pool
        if pool is None or state.episode_length % settings.save_every_steps:
            return
        novelty = self.reward_shaping.novelty
        progress: float | None = None
        if settings.progress_variable is not None:
            value = (info.get("values") or {}).get(settings.progress_variable)
            progress = None if value is None else float(value)
        pool.add(
            env.save_state(state.env_id),
            episode_return=state.episode_return,
            episode_step=int(state.extra.get("start_step", 0)) + state.episode_length,
            seed=state.episode_seed,
            progress=progress,
            cell=None if novelty is None else novelty.cell(observation, info),
        )

    # -- batched inference ----------------------------------------------------------------

    def _queue_for_inference(self, entry: E, observation: npt.NDArray[Any]) -> None:
        """Queue an observation for this poll's forward pass; `entry` says what it is for."""
        self._inference.add(entry, observation)

    def _flush_inference(self, env: OakEmuMultiEnv) -> None:
        """One forward pass for every queued observation; its actions go out as one
        message per worker."""
        if not len(self._inference):
            return
        observations, entries = self._inference.take()
        batch = torch.from_numpy(observations).to(self.context.device)
        with env.batch():
            self._act_on_batch(env, observations, batch, entries)

    # -- what each algorithm does -------------------------------------------------------------

    def _check_env(self, env: OakEmuMultiEnv) -> None:
        """Raise ValueError if `env` does not suit this actor (beyond its number of envs)."""

    @abstractmethod
    def _on_episode_start(
        self, env: OakEmuMultiEnv, state: EnvironmentState, result: StepResult
    ) -> None:
        """An episode began with `state.observation`: choose its first action."""

    @abstractmethod
    def _record_step(
        self, state: EnvironmentState, result: StepResult, next_observation: npt.NDArray[Any]
    ) -> float:
        """Keep one step for learning (`state` still describes the env before it); returns
        the reward as the learner sees it."""

    def _learner_terminated(self, state: EnvironmentState, result: StepResult) -> bool:
        """Whether the learner's targets stop at this step (nothing is bootstrapped after
        it): the episode terminated, or - with `episodic_life` - a life was lost on it.
        Call it from `_record_step`, while `state` still holds the lives before the step."""
        if result.terminated:
            return True
        if not self.config.episodic_life:
            return False
        return lives_lost(state.last_lives, result.info.get("lives")) > 0

    @abstractmethod
    def _choose_action(self, env: OakEmuMultiEnv, state: EnvironmentState) -> None:
        """The episode goes on from `state.observation`: choose the next action."""

    def _on_final_step(self, state: EnvironmentState, result: StepResult) -> None:
        """The step just recorded ended the episode (before its bookkeeping)."""

    def _on_worker_lost(self, state: EnvironmentState) -> None:
        """The env's episode was lost with its worker (before it is ended as truncated)."""

    @abstractmethod
    def _act_on_batch(
        self,
        env: OakEmuMultiEnv,
        observations: npt.NDArray[Any],
        batch: torch.Tensor,
        entries: list[E],
    ) -> None:
        """Run the model on `batch` (the queued `observations` on the run's device) and act
        on its outputs; `entries` say what each row is for."""

    def _after_batch(self, env: OakEmuMultiEnv) -> bool:
        """Called after each poll's results are handled; False ends the run."""
        return True

    def _after_loop(self) -> None:
        """Called when the loop has ended normally (budget reached or stopped)."""

    def _on_run_end(self) -> None:
        """Called whenever `run` returns or raises, before the envs close."""

    def add_step_hook(self, every: int, hook: StepHook) -> None:
        """Call `hook(step)` on the actor thread whenever the step count reaches a multiple
        of `every` (exactly at that step, between two results)."""
        if every < 1:
            raise ValueError("every must be at least 1")
        self._step_hooks.append((every, hook))

    def _on_step_done(self, step: int) -> None:
        """Called after each env step's bookkeeping, with the new step count: runs the
        step hooks that fall due."""
        for every, hook in self._step_hooks:
            if step % every == 0:
                hook(step)

    def _actor_scalars(self) -> dict[str, float]:
        """The algorithm's own actor scalars, logged every `logging.log_every_steps`."""
        return {}

    # -- metrics and state ----------------------------------------------------------------

    def _log_actor_metrics(self, step: int) -> None:
        now = time.monotonic()
        mark_time, mark_steps = self._perf_mark
        if now > mark_time:
            self.env_steps_per_s = (step - mark_steps) / (now - mark_time)
        self._perf_mark = (now, step)
        scalars = {
            "perf/env_steps_per_s": self.env_steps_per_s,
            "queue/result_depth": float(self.result_queue_depth),
            "faults/worker_restarts": float(self.worker_restarts),
        }
        episodes = max(1, self.total_episodes)
        if self._restart_pool is not None:
            scalars["restart_pool/size"] = float(len(self._restart_pool))
            scalars["restart_pool/megabytes"] = self._restart_pool.nbytes / 2**20
            scalars["restart_pool/restarted_fraction"] = self._restarted_episodes / episodes
            starts, self._restart_starts = self._restart_starts, []
            if starts:
                scalars["restart_pool/start_step"] = float(np.mean([s for s, _ in starts]))
                progress = [p for _, p in starts if p is not None]
                if progress:
                    scalars["restart_pool/start_progress"] = float(np.mean(progress))
        if self._backplay is not None:
            scalars["backplay/episode_fraction"] = self._backplay_episodes / episodes
            scalars["backplay/progress"] = self._backplay.progress
            scalars["backplay/moves"] = float(self._backplay.moves)
        scalars.update(self.reward_shaping.scalars())
        scalars.update(self._actor_scalars())
        sink = self.context.metrics
        for name, value in scalars.items():
            sink.scalar(name, value, step)

    def runtime_state(self) -> ActorRuntimeState:
        """The actor's counters, episode statistics, trajectories and RNG states."""
        rng_states: dict[str, Any] = {
            "envs": self.lifecycle.rng_states(),
            "restart": dict(self._restart_rng.bit_generator.state),
        }
        rng_states.update(self._extra_rng_states())
        return ActorRuntimeState(
            steps=self._steps,
            totals=EpisodeTotals(**self.episode_metrics.totals.to_dict()),
            episode_metrics=self.episode_metrics.state_dict(),
            trajectory=self._trajectory_runtime.state_dict(),
            rng_states=rng_states,
            extra={
                "restarted_episodes": self._restarted_episodes,
                "backplay_episodes": self._backplay_episodes,
                "backplay": self._backplay.state_dict() if self._backplay is not None else None,
                "worker_restarts": self.worker_restarts,
                "first_win": self.first_win,
                "reward_shaping": self.reward_shaping.state_dict(),
            }
            | self._extra_state(),
        )

    def restore_runtime_state(self, state: ActorRuntimeState) -> None:
        """Restore checkpointed actor counters and trajectory runtime state.

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
        if rngs.get("restart"):
            self._restart_rng.bit_generator.state = rngs["restart"]
        self._restarted_episodes = int(state.extra.get("restarted_episodes", 0))
        self._backplay_episodes = int(state.extra.get("backplay_episodes", 0))
        self.first_win = state.extra.get("first_win")
        if self._backplay is not None and state.extra.get("backplay"):
            self._backplay.load_state_dict(state.extra["backplay"])
        self._worker_restarts = int(state.extra.get("worker_restarts", 0))
        if state.extra.get("reward_shaping"):
            self.reward_shaping.load_state_dict(state.extra["reward_shaping"])
        self._restore_extra(state)

    def _extra_rng_states(self) -> dict[str, Any]:
        """The algorithm's own RNG states (JSON-serialisable)."""
        return {}

    def _extra_state(self) -> dict[str, Any]:
        """The algorithm's own counters (JSON-serialisable)."""
        return {}

    def _restore_extra(self, state: ActorRuntimeState) -> None:
        """Restore what `_extra_rng_states` and `_extra_state` saved."""
