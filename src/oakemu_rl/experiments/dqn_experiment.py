"""DQNExperiment: builds a DQN run from its configuration and runs it.

A run directory holds the resolved `config.yaml`, TensorBoard events (`tb/`),
checkpoints (`checkpoints/`) and, at the end, `summary.json`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dqn.config import DQNExperimentConfiguration
from ..dqn.learner import Learner, ReplayRatioGate
from ..dqn.model import DQNModel
from ..dqn.replay_buffer import ReplayBuffer
from ..dqn.replay_writer import ReplayWriter
from ..dqn.reward_shaping import RewardShapingPipeline
from ..dqn.state_adapter import DQNRestoreMetadata, DQNStateAdapter
from ..dqn.tester import EvaluationResult, Tester
from ..dqn.trainer import Trainer, make_multi_env
from ..runtime.checkpoints import Checkpoint, CheckpointError
from ..runtime.rollback import RollbackController
from ..runtime.thread_safe_model import ThreadSafeModel
from .experiment_base import ExperimentBase
from .run_directory import (
    CONFIG_NAME,
    SUMMARY_NAME,
    RunError,
    game_key,
    jsonable,
    load_run_config,
    new_run_dir,
    write_atomic,
)
from .torch_setup import build_optimizer, configure_torch_threads, resolve_device

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv

__all__ = [
    "CONFIG_NAME",
    "SUMMARY_NAME",
    "DQNExperiment",
    "RunError",
    "build_model",
    "build_optimizer",
    "build_replay_buffer",
    "default_run_dir",
    "game_key",
    "resolve_device",
]

EnvFactory = Callable[[], "OakEmuMultiEnv"]


def default_run_dir(config: DQNExperimentConfiguration, root: str | Path = "runs") -> Path:
    """runs/<game>-dqn-<date>-<time>[-n]."""
    return new_run_dir(config.game, "dqn", config.run_name, root)


def build_model(
    config: DQNExperimentConfiguration, observation_shape: tuple[int, ...], num_actions: int
) -> DQNModel:
    """The Q-network a configuration describes."""
    m = config.model
    return DQNModel(
        observation_shape,
        num_actions,
        torso=m.torso,
        mlp_hidden=m.mlp_hidden,
        head_hidden=m.head_hidden,
        dueling=m.dueling,
        noisy=m.noisy,
        noisy_sigma0=m.noisy_sigma0,
        traced=m.traced,
    )


def frame_stack_of(config: DQNExperimentConfiguration, observation_shape: tuple[int, ...]) -> int:
    """Frames stacked in an observation (gym: envs have none)."""
    if config.game.startswith("gym:"):
        return 1
    k = config.env.observation.frame_stack
    return k if observation_shape[0] % k == 0 else 1


def build_replay_buffer(
    config: DQNExperimentConfiguration, observation_shape: tuple[int, ...], dtype: Any
) -> ReplayBuffer:
    r = config.replay
    return ReplayBuffer(
        r.capacity,
        observation_shape,
        observation_dtype=dtype,
        frame_stack=frame_stack_of(config, observation_shape),
        n_step=r.n_step,
        gamma=config.learner.gamma,
        prioritized=r.prioritized,
        alpha=r.alpha,
        priority_eps=r.priority_eps,
    )


class DQNExperiment(ExperimentBase[DQNExperimentConfiguration]):
    """One DQN run: threads, checkpoints, evaluation, TensorBoard and summary.

    Takes the arguments of `ExperimentBase` (config, run_dir, resume, console, env
    factories, print_fn).
    """

    algo = "dqn"
    restored: DQNRestoreMetadata | None = None
    tester: Tester

    # -- loading ------------------------------------------------------------------------------

    @classmethod
    def from_run_dir(
        cls, run_dir: str | Path, *, total_steps: int | None = None, **kwargs: Any
    ) -> DQNExperiment:
        """Resume the run in `run_dir` (its config, optionally with a new step budget)."""
        run_dir = Path(run_dir)
        config = load_run_config(run_dir, DQNExperimentConfiguration, total_steps)
        return cls(config, run_dir, resume=True, **kwargs)

    # -- building -------------------------------------------------------------------------------

    def build(self) -> None:
        """Create the run directory, envs, models, buffer and threads (not started)."""
        if self._built:
            return
        config = self.config
        context, checkpoint = self._open_run()
        device = context.device

        env = (self._env_factory or (lambda: make_multi_env(config)))()
        self.env = env
        workers = 0 if getattr(env, "backend", "process") == "inline" else env.num_workers
        self.torch_threads = configure_torch_threads(config.torch_threads, workers)
        context.torch_threads = self.torch_threads
        shape = tuple(int(s) for s in env.observation_space.shape)
        num_actions = int(env.action_space.n)
        dtype = env.observation_space.dtype

        self.learner_model = build_model(config, shape, num_actions).to(device).train()
        self.target_model = build_model(config, shape, num_actions).to(device).train()
        self.actor_model = build_model(config, shape, num_actions).to(device).train()
        self.tester_model = build_model(config, shape, num_actions).to(device).eval()
        self.actor_model.load_state_dict(self.learner_model.state_dict())
        self.actor_model.requires_grad_(False)
        self.tester_model.requires_grad_(False)
        self.container: ThreadSafeModel[DQNModel] = ThreadSafeModel(self.learner_model)
        learner_cfg = config.learner
        self.optimizer = build_optimizer(
            self.learner_model, learner_cfg.learning_rate, learner_cfg.adam_eps
        )
        self.replay_buffer = build_replay_buffer(config, shape, dtype)
        self.writer = ReplayWriter(
            self.replay_buffer, config.replay.writer_queue_size, on_error=context.report_error
        )
        self.trainer = Trainer(
            context,
            self.actor_model,
            self.container,
            self.replay_buffer,
            self.writer,
            RewardShapingPipeline.from_config(config.reward_shaping),
            env_factory=lambda: env,
        )
        self.gate = ReplayRatioGate(
            learner_cfg.replay_ratio, learner_cfg.learning_starts, learner_cfg.max_lag_updates
        )
        self.trainer.gate = self.gate
        self.learner = Learner(
            context,
            self.container,
            self.target_model,
            self.optimizer,
            lambda: self.trainer.replay_buffer,
            self.gate,
            self.trainer.action_masker,
            lambda: self.trainer.steps,
        )
        self.tester = Tester(
            context,
            self.tester_model,
            self.container,
            env_factory=self._tester_env_factory,
            on_result=self._on_evaluation,
        )
        self.adapter = DQNStateAdapter(
            config,
            self.learner_model,
            self.container,
            self.actor_model,
            self.optimizer,
            self.trainer,
            self.learner,
            self.tester,
            self.tester_model,
        )
        # DQN's restore_for_rollback holds the learner itself: no `hold=` here.
        self.rollback = RollbackController(
            config.rollback,
            self.adapter,
            self.checkpoints,
            optimizer=self.optimizer,
            metrics=self.metrics,
            log=self._print,
            on_give_up=self._give_up,
            checkpoint_lock=self._manager_lock,
        )
        self.learner.rollback = self.rollback
        if checkpoint is not None:
            self._restore(checkpoint)
        self.trainer.add_step_hook(config.checkpoint.every_steps, self._checkpoint_hook)
        if config.tester.enabled:
            self.trainer.add_step_hook(config.tester.every_steps, self._evaluation_hook)
        self._built = True

    def _restore(self, checkpoint: Checkpoint) -> None:
        meta = self.adapter.restore_full(checkpoint)
        self.restored = meta
        self.rollback.total_rollbacks = meta.total_rollbacks
        self._elapsed_before = meta.elapsed_time
        self._last_checkpoint_step = meta.step
        if not meta.replay_restored:
            # Refill the buffer before learning resumes: re-baseline the replay ratio.
            self.gate.rebase(meta.learner_updates, meta.step + self.config.learner.learning_starts)
        self._print(
            f"resumed {self.run_dir} from {checkpoint.path.name}: step {meta.step:,}, "
            f"{meta.learner_updates:,} updates, replay buffer "
            + ("restored" if meta.replay_restored else "not saved (refilling)")
        )

    # -- hooks (actor thread) ----------------------------------------------------------------------

    def _checkpoint_hook(self, step: int) -> None:
        if self.rollback.check_weights(self.learner_model.parameters(), step):
            return  # non-finite weights were rolled back; do not checkpoint them
        self.save_checkpoint(step)

    def save_checkpoint(self, step: int, score: float | None = None) -> Checkpoint:
        """Write a checkpoint of the current state (call on the actor thread or when stopped).

        While the learner runs, it first makes the updates due at this step, so that the
        update count of a checkpoint is exactly the replay ratio's.
        """
        with self.trainer.freeze_replay_pipeline():  # every step so far is in the buffer
            self._catch_up_learner(step)
            files = self.adapter.create_checkpoint_files(
                elapsed_time=self.elapsed_time(),
                total_rollbacks=self.rollback.total_rollbacks,
                run_name=self.run_name,
            )
        metrics = {k: v for k, v in self.memory.snapshot().items() if not k.startswith("perf/")}
        with self._manager_lock:
            checkpoint = self.checkpoints.save(
                files,
                step=step,
                elapsed_time=self.elapsed_time(),
                run_name=self.run_name,
                metrics=metrics,
                score=score,
                extra={"algo": "dqn", "total_rollbacks": self.rollback.total_rollbacks},
            )
            self._last_checkpoint_step = step
        return checkpoint

    def _catch_up_learner(self, step: int) -> None:
        if (
            self.learner.running
            and len(self.trainer.replay_buffer) >= self.config.learner.batch_size
        ):
            self.gate.set_env_steps(step)
            self.gate.wait_until_caught_up(self.context.stop_event)

    def _evaluation_hook(self, step: int) -> None:
        self.tester.request_evaluation(step, self.container.state_dict())

    def _on_evaluation(self, result: EvaluationResult) -> None:
        with self._manager_lock, contextlib.suppress(CheckpointError, OSError):
            self.checkpoints.set_score(result.step, result.mean_return)
        if self.console is not None:
            self.console.message(
                f"eval at step {result.step:,}: mean return {result.mean_return:.2f}, "
                f"score {result.mean_score:.1f}, win rate {result.win_rate:.0%} "
                f"({result.episodes} episodes)"
            )
        self.rollback.observe_evaluation(
            float(getattr(result, self.config.rollback.metric)), result.step
        )
        target = self.config.target_eval_return
        if target is not None and result.mean_return >= target and self._stop_reason is None:
            self._stop_reason = f"evaluation return {result.mean_return:.2f} >= {target:g}"
            self.context.request_stop()

    # -- running ---------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Train until the budget, a time limit, an early stop or Ctrl-C; return the summary."""
        self.build()
        try:
            return self._run()
        finally:
            self.close()

    def _run(self) -> dict[str, Any]:
        config, trainer = self.config, self.trainer
        self._print(f"run directory: {self.run_dir.resolve()}")
        if config.logging.tensorboard:
            self._print(f"TensorBoard:   tensorboard --logdir {self.tensorboard_dir.resolve()}")
        baseline: EvaluationResult | None = None
        if not self.resume and config.tester.enabled and config.tester.random_baseline:
            baseline = self.tester.evaluate(random_policy=True, step=0)
            self.metrics.scalar("eval/random_mean_return", baseline.mean_return, 0)
            self.metrics.scalar("eval/random_mean_score", baseline.mean_score, 0)
            self._print(
                f"random policy: mean return {baseline.mean_return:.2f}, "
                f"mean score {baseline.mean_score:.1f} ({baseline.episodes} episodes)"
            )
        elif self.resume:
            baseline = self._previous_baseline()
        if baseline is not None:
            self.rollback.set_baseline(float(getattr(baseline, self.config.rollback.metric)))
        start_steps = trainer.steps
        self._session_start = time.monotonic()
        interrupted = False
        self.writer.start()
        self.learner.start()
        if config.tester.enabled:
            self.tester.start()
        actor = threading.Thread(target=self._run_actor, name="actor", daemon=True)
        actor.start()
        try:
            while actor.is_alive():
                actor.join(0.25)
                if self.console is not None:
                    self.console.update(trainer.steps)
                if (
                    config.max_time_s is not None
                    and time.monotonic() - self._session_start > config.max_time_s
                    and self._stop_reason is None
                ):
                    self._stop_reason = f"time limit of {config.max_time_s:g} s"
                    self.context.request_stop()
        except KeyboardInterrupt:
            interrupted = True
            self._stop_reason = "interrupted"
            self.context.request_stop()
            actor.join()
        if not self.context.stopping:  # the budget is spent: finish its updates
            with trainer.freeze_replay_pipeline():
                self._catch_up_learner(trainer.steps)
        session_time = time.monotonic() - self._session_start
        self.context.request_stop()
        self.learner.join()
        self.tester.stop(abort=True)
        errors = self.context.errors
        if errors:
            raise RuntimeError(f"the run failed: {errors[0]!r}") from errors[0]
        if self._stop_reason is None:
            self._stop_reason = "step budget reached"
        if self._last_checkpoint_step != trainer.steps:
            self.save_checkpoint(trainer.steps)
        final: EvaluationResult | None = None
        if config.tester.enabled and not interrupted:
            self.tester.sync_from_learner()
            final = self.tester.evaluate(config.tester.final_episodes, step=trainer.steps)
            self._record_final_evaluation(final, trainer.steps)
        self.summary = self._summary(baseline, final, start_steps, session_time)
        write_atomic(self.run_dir / SUMMARY_NAME, json.dumps(jsonable(self.summary), indent=2))
        self._report(baseline, final)
        return self.summary

    def _run_actor(self) -> None:
        try:
            self.trainer.run()
        except BaseException as exc:
            self.context.report_error(exc)

    def _summary(
        self,
        baseline: EvaluationResult | None,
        final: EvaluationResult | None,
        start_steps: int,
        session_time: float,
    ) -> dict[str, Any]:
        trainer = self.trainer
        return self._summary_fields(
            steps=trainer.steps,
            start_steps=start_steps,
            session_time=session_time,
            updates=self.learner.updates,
            episodes=(
                trainer.total_episodes,
                trainer.total_wins,
                trainer.total_losses,
                trainer.total_truncated,
            ),
            baseline=baseline,
            final=final,
        ) | {
            "replay_size": len(trainer.replay_buffer),
            "epsilon": trainer.policy.get_exploration_value(trainer.steps),
        }

    def _report(self, baseline: EvaluationResult | None, final: EvaluationResult | None) -> None:
        trainer = self.trainer
        self._print(
            f"done ({self._stop_reason}): {trainer.steps:,} env steps, {self.learner.updates:,} "
            f"updates, {trainer.total_episodes:,} episodes"
        )
        if final is not None:
            line = (
                f"final greedy evaluation: mean return {final.mean_return:.2f}, "
                f"mean score {final.mean_score:.1f}, win rate {final.win_rate:.0%} "
                f"({final.episodes} episodes)"
            )
            if baseline is not None:
                line += (
                    f"; random policy: mean return {baseline.mean_return:.2f}, "
                    f"mean score {baseline.mean_score:.1f}"
                )
            self._print(line)
        self._print(f"summary: {(self.run_dir / SUMMARY_NAME).resolve()}")

    def close(self) -> None:
        """Stop the threads and release the envs and sinks (idempotent)."""
        if not self._built:
            return
        self.context.request_stop()
        self.learner.join(10)
        self.tester.close()
        self.writer.close()
        with contextlib.suppress(Exception):
            self.env.close()
        self.metrics.close()
