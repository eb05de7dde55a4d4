"""PPOExperiment: builds a PPO run from its configuration and runs it.

A run directory holds the resolved `config.yaml`, TensorBoard events (`tb/`),
checkpoints (`checkpoints/`) and, at the end, `summary.json` - the same layout as a
DQN run, so `oakemu-rl evaluate` and `--resume` treat both alike.

Threads: the actor (`PPOActor.run`), the learner (`PPOLearner`) and the tester run
in this process; the envs run in worker processes. The learner's rollout hook
writes checkpoints and requests evaluations between rollouts, while the actor waits,
so every checkpoint is a consistent state. Every evaluation is made on the weights
of a checkpoint taken at the same step, and scores it; the RollbackController rolls
back to the best-scored one when training breaks down.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..ppo.actor import PPOActor, make_multi_env
from ..ppo.bc import ReplayObservationCache
from ..ppo.config import PPOExperimentConfiguration
from ..ppo.handshake import RolloutHandshake
from ..ppo.learner import PPOLearner
from ..ppo.model import PPOModel
from ..ppo.rollout_buffer import RolloutBuffer
from ..ppo.state_adapter import PPORestoreMetadata, PPOStateAdapter
from ..ppo.tester import EvaluationResult, PPOTester
from ..runtime.checkpoints import Checkpoint, CheckpointError, CheckpointManager
from ..runtime.config_base import ConfigError
from ..runtime.context import RuntimeContext
from ..runtime.rollback import RollbackController
from ..runtime.thread_safe_model import ThreadSafeModel
from .experiment_base import ExperimentBase
from .run_directory import (
    CONFIG_NAME,
    SUMMARY_NAME,
    RunError,
    jsonable,
    load_run_config,
    new_run_dir,
    write_atomic,
)
from .torch_setup import build_optimizer, configure_torch_threads, resolve_device

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv

__all__ = [
    "EVALUATION_SEED_OFFSET",
    "PPOExperiment",
    "build_ppo_model",
    "default_ppo_run_dir",
    "evaluate_ppo_checkpoint",
    "read_algo",
]

EnvFactory = Callable[[], "OakEmuMultiEnv"]


def default_ppo_run_dir(config: PPOExperimentConfiguration, root: str | Path = "runs") -> Path:
    """runs/<game>-ppo-<date>-<time>[-n]."""
    return new_run_dir(config.game, "ppo", config.run_name, root)


def read_algo(path: str | Path) -> str:
    """The `algo` of a config YAML, a run directory or a checkpoint directory ('dqn' if unset)."""
    path = Path(path)
    candidates = [path] if path.is_file() else [path / CONFIG_NAME, path / "config.yaml"]
    for candidate in candidates:
        if candidate.is_file():
            try:
                data = yaml.safe_load(candidate.read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise ConfigError(f"{candidate}: cannot be read: {exc}") from None
            algo = data.get("algo", "dqn") if isinstance(data, dict) else "dqn"
            return str(algo)
    raise ConfigError(f"{path}: no config file found (expected {CONFIG_NAME})")


def configure_ppo_torch_threads(config: PPOExperimentConfiguration, workers: int) -> int:
    """Set torch's thread count so the emulator workers and torch share the cores."""
    return configure_torch_threads(config.torch_threads, workers)


def build_ppo_model(
    config: PPOExperimentConfiguration, observation_shape: tuple[int, ...], num_actions: int
) -> PPOModel:
    """The actor-critic network a configuration describes."""
    m = config.model
    return PPOModel(
        observation_shape,
        num_actions,
        torso=m.torso,
        mlp_hidden=m.mlp_hidden,
        cnn_features=m.cnn_features,
        activation=m.activation,
        input_scale=m.input_scale,
        allowed_actions=config.env.allowed_actions,
    )


def _crossed(previous: int, current: int, every: int) -> bool:
    return current // every > previous // every


class PPOExperiment(ExperimentBase[PPOExperimentConfiguration]):
    """One PPO run: threads, checkpoints, evaluation, automatic rollback, TensorBoard, summary.

    Takes the arguments of `ExperimentBase` (config, run_dir, resume, console, env
    factories, print_fn).
    """

    algo = "ppo"
    restored: PPORestoreMetadata | None = None
    tester: PPOTester
    _last_hook_step = 0

    # -- loading ------------------------------------------------------------------------------

    @classmethod
    def from_run_dir(
        cls, run_dir: str | Path, *, total_steps: int | None = None, **kwargs: Any
    ) -> PPOExperiment:
        """Resume the run in `run_dir` (its config, optionally with a new step budget)."""
        run_dir = Path(run_dir)
        config = load_run_config(run_dir, PPOExperimentConfiguration, total_steps)
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
        self.torch_threads = configure_ppo_torch_threads(config, workers)
        context.torch_threads = self.torch_threads
        shape = tuple(int(s) for s in env.observation_space.shape)
        num_actions = int(env.action_space.n)
        dtype = env.observation_space.dtype

        self.learner_model = build_ppo_model(config, shape, num_actions).to(device).train()
        self.actor_model = build_ppo_model(config, shape, num_actions).to(device).eval()
        self.tester_model = build_ppo_model(config, shape, num_actions).to(device).eval()
        self.actor_model.load_state_dict(self.learner_model.state_dict())
        self.actor_model.requires_grad_(False)
        self.tester_model.requires_grad_(False)
        self.container: ThreadSafeModel[PPOModel] = ThreadSafeModel(self.learner_model)
        self.optimizer = build_optimizer(
            self.learner_model, config.ppo.learning_rate, config.ppo.adam_eps
        )
        self.rollout_buffer = RolloutBuffer(
            config.ppo.rollout_steps, config.env.num_envs, shape, dtype, device
        )
        self.handshake = RolloutHandshake(context.stop_event)
        cache_settings = config.replay_observation_cache
        self.replay_observation_cache = (
            ReplayObservationCache(cache_settings.capacity) if cache_settings.enabled else None
        )
        self.actor = PPOActor(
            context,
            self.actor_model,
            self.container,
            self.rollout_buffer,
            self.handshake,
            replay_observation_cache=self.replay_observation_cache,
            env_factory=lambda: env,
        )
        self.learner = PPOLearner(
            context,
            self.container,
            self.optimizer,
            self.rollout_buffer,
            self.handshake,
            lambda: self.actor.steps,
        )
        self.tester = PPOTester(
            context,
            self.tester_model,
            self.container,
            env_factory=self._tester_env_factory,
            on_result=self._on_evaluation,
        )
        self.adapter = PPOStateAdapter(
            config,
            self.learner_model,
            self.container,
            self.actor_model,
            self.optimizer,
            self.actor,
            self.learner,
            self.tester,
            self.tester_model,
        )
        self.rollback = RollbackController(
            config.rollback,
            self.adapter,
            self.checkpoints,
            lr_scale_setter=self.learner.set_lr_scale,
            metrics=self.metrics,
            log=self._message,
            on_give_up=self._give_up,
            checkpoint_lock=self._manager_lock,
            hold=self.learner.hold,
        )
        self.learner.rollback = self.rollback
        if checkpoint is not None:
            self._restore(checkpoint)
        self.learner.rollout_hooks.append(self._rollout_hook)
        self.actor.hand_off_waits = self._hook_saves
        self._built = True

    def _restore(self, checkpoint: Checkpoint) -> None:
        meta = self.adapter.restore_full(checkpoint)
        self.restored = meta
        self._elapsed_before = meta.elapsed_time
        self._last_checkpoint_step = meta.step
        self._last_hook_step = meta.step
        if meta.rollback_state:
            self.rollback.load_state_dict(meta.rollback_state)
        self.rollback.total_rollbacks = meta.total_rollbacks
        self._print(
            f"resumed {self.run_dir} from {checkpoint.path.name}: step {meta.step:,}, "
            f"{meta.rollouts:,} rollouts, {meta.learner_updates:,} updates, "
            f"{meta.total_rollbacks} rollback(s) so far"
        )

    # -- messages --------------------------------------------------------------------------------

    def _message(self, text: str) -> None:
        if self.console is not None:
            self.console.message(text)
        else:
            self._print(text)

    def _hook_evaluates(self, step: int) -> bool:
        """Whether the rollout hook at `step` requests an evaluation."""
        tester = self.config.tester
        return tester.enabled and _crossed(self._last_hook_step, step, tester.every_steps)

    def _hook_saves(self, step: int) -> bool:
        """Whether the rollout hook at `step` writes a checkpoint (the actor, when it
        overlaps collection with training, waits for such rollouts)."""
        every = self.config.checkpoint.every_steps
        return self._hook_evaluates(step) or _crossed(self._last_hook_step, step, every)

    def _rollout_hook(self, step: int) -> None:
        evaluate, save = self._hook_evaluates(step), self._hook_saves(step)
        self._last_hook_step = step
        if not save:
            return
        if self.rollback.check_weights(self.learner_model.parameters(), step):
            return  # rolled back (or stopping): these weights are not worth keeping
        self.save_checkpoint(step)
        if evaluate:
            self.tester.request_evaluation(step, self.container.state_dict())

    def save_checkpoint(self, step: int, score: float | None = None) -> Checkpoint:
        """Write a checkpoint of the current state (from a rollout hook or when stopped)."""
        self.adapter.rollback_state = self.rollback.state_dict()
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
                extra={"algo": "ppo", "total_rollbacks": self.rollback.total_rollbacks},
            )
            self._last_checkpoint_step = step
        return checkpoint

    # -- evaluation (tester thread) -----------------------------------------------------------

    def _score_of(self, result: EvaluationResult) -> float:
        return float(getattr(result, self.config.rollback.metric))

    def _on_evaluation(self, result: EvaluationResult) -> None:
        with self._manager_lock, contextlib.suppress(CheckpointError, OSError):
            self.checkpoints.set_score(result.step, result.mean_return)
        self._message(
            f"eval at step {result.step:,}: mean return {result.mean_return:.2f}, "
            f"score {result.mean_score:.1f}, win rate {result.win_rate:.0%} "
            f"({result.episodes} episodes)"
        )
        target = self.config.target_eval_return
        if target is not None and result.mean_return >= target and self._stop_reason is None:
            self._stop_reason = f"evaluation return {result.mean_return:.2f} >= {target:g}"
            self.context.request_stop()
            return
        self.rollback.observe_evaluation(self._score_of(result), result.step)

    # -- running --------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Train until the step budget, the time limit, an early stop or Ctrl-C; returns the
        summary."""
        self.build()
        config, actor = self.config, self.actor
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
            self.rollback.set_baseline(self._score_of(baseline))
        start_steps = actor.steps
        self._session_start = time.monotonic()
        interrupted = False
        self.learner.start()
        if config.tester.enabled:
            self.tester.start()
        actor_thread = threading.Thread(target=self._run_actor, name="actor", daemon=True)
        actor_thread.start()
        try:
            while actor_thread.is_alive():
                actor_thread.join(0.25)
                if self.console is not None:
                    self.console.update(actor.steps)
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
            actor_thread.join()
        session_time = time.monotonic() - self._session_start
        self.context.request_stop()
        self.handshake.stop()
        self.learner.join()
        if self.learner.running:
            self._print("warning: the learner thread did not stop")
        self.tester.stop(abort=True)
        errors = self.context.errors
        try:
            if errors:
                raise RuntimeError(f"the run failed: {errors[0]!r}") from errors[0]
            if self._stop_reason is None:
                self._stop_reason = "step budget reached"
            if self._last_checkpoint_step != actor.steps and not self.rollback.gave_up:
                self.save_checkpoint(actor.steps)
            final: EvaluationResult | None = None
            if config.tester.enabled and not interrupted:
                self.tester.sync_from_learner()
                final = self.tester.evaluate(config.tester.final_episodes, step=actor.steps)
                self._record_final_evaluation(final, actor.steps)
            self.summary = self._summary(baseline, final, start_steps, session_time)
            write_atomic(self.run_dir / SUMMARY_NAME, json.dumps(jsonable(self.summary), indent=2))
            self._report(baseline, final)
        finally:
            self.close()
        return self.summary

    def _run_actor(self) -> None:
        try:
            self.actor.run()
        except BaseException as exc:
            self.context.report_error(exc)

    def _summary(
        self,
        baseline: EvaluationResult | None,
        final: EvaluationResult | None,
        start_steps: int,
        session_time: float,
    ) -> dict[str, Any]:
        actor = self.actor
        return self._summary_fields(
            steps=actor.steps,
            start_steps=start_steps,
            session_time=session_time,
            updates=self.learner.updates,
            episodes=(
                actor.total_episodes,
                actor.total_wins,
                actor.total_losses,
                actor.total_truncated,
            ),
            baseline=baseline,
            final=final,
        ) | {
            "rollouts": self.learner.rollouts,
        }

    def _report(self, baseline: EvaluationResult | None, final: EvaluationResult | None) -> None:
        actor = self.actor
        self._print(
            f"done ({self._stop_reason}): {actor.steps:,} env steps, {self.learner.rollouts:,} "
            f"rollouts, {self.learner.updates:,} updates, {actor.total_episodes:,} episodes, "
            f"{self.rollback.total_rollbacks} rollback(s)"
        )
        if final is not None:
            line = (
                f"final {final.policy} evaluation: mean return {final.mean_return:.2f}, "
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
        self.handshake.stop()
        self.learner.join(10)
        self.tester.close()
        with contextlib.suppress(Exception):
            self.env.close()
        self.metrics.close()


#: Default env seed offset of `evaluate_ppo_checkpoint`, apart from training and tester envs.
EVALUATION_SEED_OFFSET = 2_000_003


def evaluate_ppo_checkpoint(
    checkpoint: Checkpoint | str | Path,
    episodes: int | None = None,
    *,
    seed: int | None = None,
    deterministic: bool = True,
    random_policy: bool = False,
    num_envs: int | None = None,
    backend: str | None = None,
    env_factory: EnvFactory | None = None,
) -> EvaluationResult:
    """Play `episodes` episodes (default: the config's `tester.episodes`) with the learner
    weights of a PPO checkpoint, on fresh envs.

    `checkpoint` is a Checkpoint, a checkpoint directory, or a run directory (its best
    checkpoint, else its newest). Env seeds start at `seed` (default: the run's seed +
    EVALUATION_SEED_OFFSET). Actions are the most likely ones unless `deterministic` is False.
    """
    if not isinstance(checkpoint, Checkpoint):
        checkpoint = _find_ppo_checkpoint(Path(checkpoint))
    if not checkpoint.has("config.yaml") or not checkpoint.has("model.pt"):
        raise RunError(f"{checkpoint.path}: not a PPO checkpoint (no config.yaml or model.pt)")
    config = PPOExperimentConfiguration.from_dict(
        yaml.safe_load(checkpoint.read_bytes("config.yaml")),
        source=str(checkpoint.file("config.yaml")),
    )
    episodes = episodes or config.tester.episodes
    data = config.model_dump(mode="json")
    data["tester"]["num_envs"] = max(1, min(episodes, num_envs or config.tester.num_envs))
    if backend is not None:
        data["env"]["backend"] = backend
    config = PPOExperimentConfiguration.from_dict(data)
    env_seed = config.seed + EVALUATION_SEED_OFFSET if seed is None else seed
    if env_factory is None:

        def env_factory() -> OakEmuMultiEnv:
            return make_multi_env(
                config, num_envs=config.tester.num_envs, seed_offset=env_seed - config.seed
            )

    env = env_factory()
    try:
        device = resolve_device(config.device)
        shape = tuple(int(s) for s in env.observation_space.shape)
        model = build_ppo_model(config, shape, int(env.action_space.n)).to(device)
        model.load_state_dict(checkpoint.load_torch("model.pt", map_location=device)["learner"])
        model.eval().requires_grad_(False)
        context: RuntimeContext[PPOExperimentConfiguration] = RuntimeContext(
            config=config, device=device, run_dir=checkpoint.path, seed=env_seed
        )
        tester = PPOTester(context, model, env_factory=lambda: env)
        return tester.evaluate(
            episodes,
            random_policy=random_policy,
            deterministic=deterministic,
            step=checkpoint.step,
        )
    finally:
        env.close()


def _find_ppo_checkpoint(path: Path) -> Checkpoint:
    if not path.exists():
        raise RunError(f"{path}: no such run directory or checkpoint")
    if (path / "manifest.json").is_file():
        return Checkpoint.open(path)
    manager = CheckpointManager(path / "checkpoints" if (path / "checkpoints").is_dir() else path)
    checkpoint = manager.best() or manager.latest()
    if checkpoint is None:
        raise RunError(f"{path}: no valid checkpoint found")
    return checkpoint
