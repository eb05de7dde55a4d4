"""Experiment: one training run, whatever the algorithm.

It owns the run loop: open (or resume) the run directory, build the envs, models,
threads and checkpoint state, run the actor, learner and tester threads, evaluate,
checkpoint, roll back, stop on the step budget, a time limit, a target return or Ctrl-C,
and write `summary.json`. A run directory holds the resolved `config.yaml`,
TensorBoard events (`tb/`), checkpoints (`checkpoints/`) and the summary.

An algorithm (`DQNExperiment`, `PPOExperiment`, `DistillExperiment`) supplies what
differs, through a few named hooks: its model (`build_model`), its actor and learner
(`_build_algorithm`), what wraps its training envs (`_training_env_wrapper`),
how a checkpoint is made consistent (`_consistent_checkpoint`), what happens when the
step budget is spent (`_finish_budget`), its extra threads (`_start_algorithm`,
`_stop_algorithm`) and its own summary fields (`_summary_extra`, `_counts`).

Checkpoints and evaluations fall at multiples of `checkpoint.every_steps` and
`tester.every_steps` (`_at_schedule_point`): every evaluation is made on the weights of
a checkpoint taken at the same step and scores it, so that rollback and `--best` find
the best weights.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import torch
from torch import nn

from ..envs.lives import win_rate_text
from ..envs.multi_env import MultiEnvError
from ..envs.observation import named_variables
from ..envs.observation_choice import ObservationChoice, auto_choice
from ..games.loader import GameDefinition, load_game
from ..runtime.actor import ActorBase
from ..runtime.checkpoints import Checkpoint, CheckpointError, CheckpointFile, CheckpointManager
from ..runtime.config_base import ConfigError, ExperimentConfiguration, InitAnchorSettings
from ..runtime.context import RuntimeContext
from ..runtime.env_owner import EnvFactory, make_multi_env
from ..runtime.metrics import ConsoleSink, MemorySink, MultiSink
from ..runtime.progress import progress_bar
from ..runtime.protocols import LearnerRuntime
from ..runtime.rollback import RollbackController
from ..runtime.state_adapter import CONFIG_FILE, MODEL_FILE, RestoreMetadata, StateAdapterBase
from ..runtime.student_anchor import StudentAnchor
from ..runtime.tester import EvaluationAborted, EvaluationResult, TesterBase, is_better
from ..runtime.thread_safe_model import ThreadSafeModel
from ..trajectories.demonstrations import DemonstrationSet
from ..trajectories.trajectory_file import game_file_label
from .run_directory import (
    CONFIG_NAME,
    SUMMARY_NAME,
    RunError,
    jsonable,
    load_run_config,
    new_run_dir,
    open_run_directory,
    read_algo,
    write_atomic,
)
from .stop_signals import RunAborted
from .torch_setup import build_optimizer, configure_torch_threads, resolve_device

ConfigT = TypeVar("ConfigT", bound=ExperimentConfiguration)
ExperimentT = TypeVar("ExperimentT", bound="Experiment[Any]")

ROLLBACK_FILE = "rollback.json"
"""The rollback controller's state in a checkpoint (counts, learning-rate scale, history)."""
INIT_FROM_FILE = "init_from.json"
"""Where a run started from a distilled student records which (see `Experiment`'s
`init_from`); `summary.json` repeats it as `init_from`."""
INIT_STUDENT_DIR = "init_student"
"""The student a run started from, kept in its run directory as a checkpoint of its own
(config.yaml and model.pt) while `init_anchor` holds the run near it, so that a resumed
run anchors to the same student whatever became of the distill run."""


class RunFailed(RuntimeError):
    """The run stopped on a fault it could not train through (env workers that keep
    failing, a checkpoint that cannot be written) after writing what it could: the final
    checkpoint when possible, and the summary (`summary`)."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary


class Learner(LearnerRuntime, Protocol):
    """What the run loop asks of an algorithm's learner."""

    @property
    def running(self) -> bool: ...

    def start(self) -> None: ...

    def join(self, timeout: float | None = None) -> None: ...

    def set_lr_scale(self, scale: float) -> None: ...


def _find_student(source: str | Path) -> Checkpoint:
    """The checkpoint of the distill run (or the checkpoint) `source` whose student a new
    run starts from: the best-scored, else the newest valid one."""
    from ..distill.config import DistillExperimentConfiguration
    from .evaluation import find_checkpoint, read_checkpoint_config

    try:
        checkpoint = find_checkpoint(source, best=True)
        algo = read_algo(checkpoint.path)
    except (CheckpointError, ConfigError, RunError) as exc:
        raise ConfigError(f"init_from: {exc}") from None
    if algo != "distill" or not checkpoint.has(MODEL_FILE):
        raise ConfigError(
            f"init_from: {source} is a {algo} run; a run starts from the student of a "
            "distill run (train --algo distill)"
        )
    try:
        _, config = read_checkpoint_config(checkpoint)
    except (CheckpointError, ConfigError, RunError) as exc:
        raise ConfigError(f"init_from: {exc}") from None
    assert isinstance(config, DistillExperimentConfiguration)
    if config.distill.members > 1:
        raise ConfigError(
            f"init_from: the student of {source} is an ensemble of {config.distill.members} "
            "networks "
            "(distill.members); a run starts from one student: train it with "
            "distill.members 1"
        )
    return checkpoint


def crossed(previous: int, current: int, every: int) -> bool:
    """Whether a multiple of `every` lies in (previous, current]."""
    return current // every > previous // every


class Experiment(ABC, Generic[ConfigT]):
    """One run: threads, checkpoints, evaluation, automatic rollback, TensorBoard, summary.

    Args:
        config: the run's configuration.
        run_dir: where the run's files go (default: runs/<game>-<algo>-<date>-<time>).
        resume: continue the run in `run_dir` from its newest valid checkpoint.
        console: show the progress display (default: `config.logging.console`).
        env_factory: builds the training multi-env (default: from the config).
        tester_env_factory: builds the tester's multi-env (default: from the config).
        print_fn: where the run's messages go.
        allow_code: run Python code that the configuration names (a callable reward
            shaper, a Gymnasium id with a module); refused by default (CodeNotAllowedError),
            since a config file or a run directory may come from anyone.
        init_from: a distill run directory (or one of its checkpoints): a new run starts
            from its student, the best checkpoint's else the newest's (`_load_student`
            says how); where it came from goes to `init_from.json` and the summary.
    """

    algo: ClassVar[str]
    """The algorithm's name in run-directory names, checkpoints and summaries."""
    config_type: ClassVar[type[ExperimentConfiguration]]
    """The algorithm's configuration class."""
    tester_type: ClassVar[type[TesterBase[Any]]]
    """The algorithm's tester class."""
    adapter_type: ClassVar[type[StateAdapterBase[Any]]]
    """The algorithm's state-adapter class (what its checkpoints hold)."""

    def __init_subclass__(
        cls,
        *,
        algo: str,
        config_type: type[ExperimentConfiguration],
        tester_type: type[TesterBase[Any]],
        adapter_type: type[StateAdapterBase[Any]],
        **kwargs: Any,
    ) -> None:
        """An algorithm's experiment names its parts in its class statement."""
        super().__init_subclass__(**kwargs)
        cls.algo = algo
        cls.config_type = config_type
        cls.tester_type = tester_type
        cls.adapter_type = adapter_type

    # Built by the algorithm (`_build_algorithm`):
    actor: ActorBase[Any, Any]
    learner: Learner

    def __init__(
        self,
        config: ConfigT,
        run_dir: str | Path | None = None,
        *,
        resume: bool = False,
        console: bool | None = None,
        env_factory: EnvFactory | None = None,
        tester_env_factory: EnvFactory | None = None,
        print_fn: Callable[[str], None] | None = None,
        allow_code: bool = False,
        init_from: str | Path | None = None,
    ) -> None:
        source = f"{Path(run_dir) / CONFIG_NAME}" if resume and run_dir is not None else None
        config.check_code_allowed(allow_code, source or "the configuration")
        if init_from is not None and resume:
            raise ConfigError(
                f"init_from: {init_from} starts a new run from a student; a resumed run goes "
                "on from its own checkpoint"
            )
        self._student = None if init_from is None else _find_student(init_from)
        # A saved configuration lists every setting: only a changed one is a choice.
        if init_from is None and not resume and config.init_anchor != InitAnchorSettings():
            raise ConfigError(
                "init_anchor: anchors a run started from a distilled student; give the run "
                "--init-from RUN (in Python: init_from=RUN) or leave init_anchor out"
            )
        self.config = config
        self.run_dir = (
            Path(run_dir)
            if run_dir is not None
            else new_run_dir(config.game, self.algo, config.run_name)
        )
        self.resume = resume
        self.show_console = config.logging.console if console is None else console
        self._env_factory = env_factory
        self._tester_env_factory = tester_env_factory
        self._print = print_fn or (lambda text: print(text, flush=True))
        self.run_name = config.run_name or self.run_dir.name
        self.memory = MemorySink()
        self.summary: dict[str, Any] = {}
        self.restored: RestoreMetadata | None = None
        """What a resumed run restored (None for a new run)."""
        self._auto_choice: ObservationChoice | None = None
        """What `observation: auto` chose when the run was opened (None when not auto)."""
        self._built = False
        self._last_checkpoint_step: int | None = None
        self._last_point_step = 0
        self._elapsed_before = 0.0
        self._session_start = time.monotonic()
        self._stop_request: str | None = None
        self._fault: str | None = None
        self._final_phase = False
        self._evaluation_times: dict[int, float] = {}

    @classmethod
    def from_run_dir(
        cls: type[ExperimentT],
        run_dir: str | Path,
        *,
        total_steps: int | None = None,
        **kwargs: Any,
    ) -> ExperimentT:
        """Resume the run in `run_dir` (its config, optionally with a new step budget)."""
        run_dir = Path(run_dir)
        config = load_run_config(run_dir, cls.config_type, total_steps)
        return cls(config, run_dir, resume=True, **kwargs)

    # -- what an algorithm supplies ---------------------------------------------------------

    @staticmethod
    @abstractmethod
    def build_model(config: Any, observation_shape: tuple[int, ...], num_actions: int) -> nn.Module:
        """The network a configuration describes."""

    @abstractmethod
    def _optimizer_settings(self) -> tuple[float, float]:
        """The learner's (learning rate, Adam epsilon)."""

    @abstractmethod
    def _build_algorithm(self, env: Any, observation_shape: tuple[int, ...], dtype: Any) -> None:
        """Build `actor` and `learner` (and whatever they need) on the parts built so far."""

    def _trained_model(self) -> nn.Module:
        """The network the optimizer trains: the learner model itself, unless the learner
        model is an average of another (`distill.ema_decay`)."""
        return self.learner_model

    def _load_student(self, student: dict[str, torch.Tensor]) -> str:
        """Start the new run's networks from a distilled student's weights (a `PPOModel`'s
        state dict); returns what was loaded, for the run's message. Raises ConfigError
        when this algorithm cannot take them."""
        raise ConfigError(f"init_from: algo {self.algo} cannot start from a distilled student")

    def _training_env_wrapper(self) -> Callable[[Any], Any] | None:
        """What wraps each training env where it runs (`make_multi_env`'s `env_wrapper`;
        None: nothing). The tester's envs are never wrapped."""
        return None

    def _consistent_checkpoint(self, step: int) -> AbstractContextManager[None]:
        """Held while a checkpoint at `step` is taken."""
        return contextlib.nullcontext()

    def _finish_budget(self) -> None:
        """The step budget is spent: finish what belongs to it (before the threads stop)."""

    def _start_algorithm(self) -> None:
        """Start the algorithm's own threads (before the learner)."""

    def _stop_algorithm(self) -> None:
        """Stop the algorithm's own threads and wake its waiters (idempotent)."""

    def _summary_extra(self) -> dict[str, Any]:
        """The algorithm's own `summary.json` fields."""
        return {}

    def _counts(self) -> str:
        """The training counts of the final report line."""
        return f"{self.learner.updates:,} updates"

    # -- building -------------------------------------------------------------------------

    def build(self) -> None:
        """Create the run directory, envs, models, buffers and threads (not started);
        restore the newest checkpoint when resuming."""
        if self._built:
            return
        created = not self.resume and not self.run_dir.exists()
        checkpoint = self._open_run()
        try:
            self._build_parts(checkpoint)
        except BaseException:
            self._release()
            if not self.resume:
                self._discard_new_run(created)
            raise
        self._built = True

    def _discard_new_run(self, created: bool) -> None:
        """A new run that could not start leaves nothing behind that would block a retry."""
        if created:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            return
        (self.run_dir / CONFIG_NAME).unlink(missing_ok=True)
        shutil.rmtree(self.tensorboard_dir, ignore_errors=True)

    def _build_parts(self, checkpoint: Checkpoint | None) -> None:
        config = self.config
        device = self.context.device
        self._game_identity = self._check_game_settings()  # before any env is made of them
        wrapper = self._training_env_wrapper()
        env = (self._env_factory or (lambda: make_multi_env(config, env_wrapper=wrapper)))()
        self.env = env
        workers = 0 if env.backend == "inline" else env.num_workers
        self.torch_threads = configure_torch_threads(config.torch_threads, workers)
        self.context.torch_threads = self.torch_threads
        shape = tuple(int(s) for s in env.observation_space.shape)
        num_actions = int(env.action_space.n)

        def model() -> nn.Module:
            return self.build_model(config, shape, num_actions).to(device)

        self.learner_model = model().train()
        self.actor_model = model().train()
        self.tester_model = model().eval()
        self.actor_model.load_state_dict(self.learner_model.state_dict())
        self.actor_model.requires_grad_(False)
        self.tester_model.requires_grad_(False)
        self.container: ThreadSafeModel[Any] = ThreadSafeModel(self.learner_model)
        self.trained_model = self._trained_model()
        self.optimizer = build_optimizer(self.trained_model, *self._optimizer_settings())
        self.rollback = RollbackController(
            config.rollback,
            self.checkpoints,
            self._roll_back_to,
            metrics=self.metrics,
            log=self._message,
            on_give_up=self.context.request_stop,
        )
        self.context.demonstrations = self._load_demonstrations()
        self._build_algorithm(env, shape, env.observation_space.dtype)
        self.actor.clock = self.elapsed_time
        if self._student is not None and checkpoint is None:
            self._start_from_student(self._student)
        self._attach_anchor(shape, num_actions)
        self.tester: TesterBase[Any] = self.tester_type(
            self.context,
            self.tester_model,
            self.container,
            self._tester_env_factory,
            on_result=self._on_evaluation,
        )
        self.adapter = self.adapter_type(
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
        if checkpoint is not None:
            self._restore(checkpoint)

    def _start_from_student(self, student: Checkpoint) -> None:
        """Load the student of `student` (a distill checkpoint) and record where it came from."""
        weights = student.load_torch(MODEL_FILE)["learner"]
        loaded = self._load_student(weights)
        record = {
            "run": str(student.path.parent.parent.resolve()),
            "checkpoint": str(student.path.resolve()),
            "step": student.step,
            "loaded": loaded,
        }
        write_atomic(self.run_dir / INIT_FROM_FILE, json.dumps(record, indent=2))
        self._print(f"init from {student.path} (step {student.step:,}): {loaded}")
        anchor = self.config.init_anchor
        if anchor.coef > 0:
            if self.config.env.allowed_actions is not None:
                raise ConfigError(
                    "init_anchor.coef: the student chooses among all the game's actions and "
                    "env.allowed_actions narrows this run's; set init_anchor.coef to 0 or "
                    "leave env.allowed_actions out"
                )
            kept = CheckpointManager(self.run_dir / INIT_STUDENT_DIR, keep_last=1, keep_best=0)
            kept.save(
                [
                    CheckpointFile(name, student.read_bytes(name))
                    for name in (CONFIG_FILE, MODEL_FILE)
                ],
                step=student.step,
                elapsed_time=student.elapsed_time,
                run_name=student.run_name,
            )

    def _attach_anchor(self, observation_shape: tuple[int, ...], num_actions: int) -> None:
        """Give the learner the anchor to the student this run started from, if it has one
        (`init_anchor`; a resumed run finds the student in `INIT_STUDENT_DIR`)."""
        from .evaluation import load_checkpoint_model, read_checkpoint_config

        if self.config.init_anchor.coef == 0:
            return
        kept = CheckpointManager(self.run_dir / INIT_STUDENT_DIR).latest()
        if kept is None:
            return
        _, student_config = read_checkpoint_config(kept)
        student = load_checkpoint_model(
            kept, student_config, observation_shape, num_actions, self.context.device
        )
        self.context.student_anchor = StudentAnchor(student, self.config.init_anchor)

    def _init_from_record(self) -> dict[str, Any] | None:
        """Where this run's networks started from (`init_from.json`), None for a fresh start."""
        with contextlib.suppress(OSError, ValueError):
            record: dict[str, Any] = json.loads((self.run_dir / INIT_FROM_FILE).read_text())
            return record
        return None

    def _check_game_settings(self) -> tuple[str, str, str] | None:
        """Check the settings that name game variables; returns the game's (name, file
        label, YAML hash) that its trajectory files carry (None for a Gymnasium env)."""
        config = self.config
        if config.game.startswith("gym:"):
            return None
        game = load_game(config.game)
        progress = config.restart_pool.progress_variable
        if progress is not None:
            try:
                game.data_variable(progress)
            except ValueError as exc:
                raise ConfigError(f"restart_pool.progress_variable: {exc}") from None
        try:
            named_variables(config.env.observation, game)
        except ValueError as exc:
            raise ConfigError(f"env.observation: {exc}") from None
        if config.episodic_life and "lives" not in game.spec.data:
            raise ConfigError(
                f"episodic_life: {game.path} has no data variable 'lives' to lose; define one "
                "in the game YAML or set episodic_life: false"
            )
        self._check_algorithm_game_settings(game)
        return game.name, game_file_label(game), game.yaml_sha256

    def _check_algorithm_game_settings(self, game: GameDefinition) -> None:
        """Check the algorithm's own settings that name variables of `game` (an OakEmu
        game; raise ConfigError)."""

    def _write_trajectories(self) -> None:
        """The run's kept episodes (wins and best) as trajectory files in trajectories/."""
        if self._game_identity is not None:
            self.actor.trajectory_runtime.write(self.trajectories_dir, *self._game_identity)

    @property
    def trajectories_dir(self) -> Path:
        """Where the run's trajectory files go."""
        return self.run_dir / "trajectories"

    def _load_demonstrations(self) -> DemonstrationSet | None:
        """The demonstrations `demos.paths` names, checked against the game and replayed
        once (states saved along them); None without any."""
        demos = self.config.demos
        if not demos.paths:
            return None
        game = load_game(self.config.game)
        found = DemonstrationSet.load(
            demos.paths,
            game,
            self.config.env.observation,
            demos.backplay_stride,
        )
        with progress_bar(
            found.total_steps, "replaying demonstrations", self.show_console
        ) as advance:
            found.prepare(advance)
        won = sum(d.trajectory.won for d in found)
        self._message(
            f"demonstrations: {len(found)} ({won} won, {found.total_steps:,} steps) from "
            f"{', '.join(demos.paths)}"
        )
        return found

    def _resolve_observation(self) -> None:
        """Resolve `env.observation.type: auto` before the run directory is opened: a new
        run stores the observation auto chose in its configuration (and `config.yaml`),
        so a resume, `evaluate` or `export` sees exactly that observation, never a new
        choice. A resumed run whose stored configuration still says `auto` (written by an
        older version) keeps it and chooses again, as it always did."""
        self._auto_choice = auto_choice(self.config.env.observation, self.config.game)
        if self._auto_choice is not None and not self.resume:
            env = self.config.env.model_copy(update={"observation": self._auto_choice.config})
            self.config = self.config.model_copy(update={"env": env})

    def _open_run(self) -> Checkpoint | None:
        """Open the run directory, its sinks and the seeded runtime context; returns the
        checkpoint to resume from (None for a new run)."""
        self._resolve_observation()
        opened = open_run_directory(
            self.run_dir,
            self.config,
            resume=self.resume,
            show_console=self.show_console,
            memory=self.memory,
            print_fn=self._print,
        )
        self.checkpoints: CheckpointManager = opened.checkpoints
        self.metrics: MultiSink = opened.metrics
        self.console: ConsoleSink | None = opened.console
        self.tensorboard_dir = opened.tensorboard_dir
        torch.manual_seed(self.config.seed)
        self.context: RuntimeContext[ConfigT] = RuntimeContext(
            config=self.config,
            device=resolve_device(self.config.device),
            run_dir=self.run_dir,
            metrics=self.metrics,
            seed=self.config.seed,
            session_clock=lambda: time.monotonic() - self._session_start,
        )
        return opened.resume_from

    def _restore(self, checkpoint: Checkpoint) -> None:
        try:
            meta = self.adapter.restore_full(checkpoint)
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise CheckpointError(
                f"{checkpoint.path}: cannot be restored into this run ({type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''})"
            ) from None
        self.restored = meta
        self._elapsed_before = meta.elapsed_time
        self._last_checkpoint_step = self._last_point_step = meta.step
        if checkpoint.has(ROLLBACK_FILE):
            self.rollback.load_state_dict(checkpoint.read_json(ROLLBACK_FILE))
        self.rollback.total_rollbacks = meta.total_rollbacks
        self._print(
            f"resumed {self.run_dir} from {checkpoint.path.name}: step {meta.step:,}, "
            f"{meta.describe()}, {meta.total_rollbacks} rollback(s) so far"
        )

    # -- checkpoints, evaluations, rollbacks ----------------------------------------------

    def _due(self, step: int) -> tuple[bool, bool]:
        """(checkpoint, evaluate) at `step`, given the last schedule point."""
        tester, last = self.config.tester, self._last_point_step
        evaluate = tester.enabled and crossed(last, step, tester.every_steps)
        save = evaluate or crossed(last, step, self.config.checkpoint.every_steps)
        return save, evaluate

    def _saves_at(self, step: int) -> bool:
        """Whether a schedule point at `step` writes a checkpoint."""
        return self._due(step)[0]

    def _at_schedule_point(self, step: int) -> None:
        """Checkpoint and request an evaluation where the schedule says (on the thread that
        keeps the state consistent: DQN's actor, PPO's learner between rollouts)."""
        save, evaluate = self._due(step)
        self._last_point_step = step
        if not save:
            return
        if self.rollback.check_weights(self.learner_model.parameters(), step):
            return  # rolled back (or stopping): these weights are not worth keeping
        self.save_checkpoint(step)
        if evaluate:
            self._evaluation_times[step] = self.elapsed_time()
            self.tester.request_evaluation(step, self.container.state_dict())

    def save_checkpoint(self, step: int, score: float | None = None) -> Checkpoint | None:
        """Write a checkpoint of the current state (at a schedule point or when stopped);
        none once automatic rollback has given up (training broke down). A write that
        fails (a full disk) is reported, leaves the previous checkpoints intact and, as
        `checkpoint.on_write_error` says, stops the run or lets it go on."""
        try:
            return self._write_checkpoint(step, score)
        except OSError as exc:
            self._on_checkpoint_error(step, exc)
            return None

    def _on_checkpoint_error(self, step: int, exc: OSError) -> None:
        latest = self.checkpoints.latest()
        kept = f"{latest.path.name} is intact" if latest else "there is no earlier checkpoint"
        where = f" ({exc.filename})" if exc.filename else ""
        message = f"checkpoint at step {step:,} not written: {exc.strerror or exc}{where}; {kept}"
        self.metrics.scalar("faults/checkpoint_write_errors", 1.0, step)
        if self._final_phase:  # the final checkpoint: nothing to go on to
            self._fault = self._fault or message
            self._message(message)
        elif self.config.checkpoint.on_write_error == "stop":
            self._fault = self._fault or message
            self._message(f"{message}; stopping (checkpoint.on_write_error: stop)")
            self.context.request_stop(f"checkpoint write failed at step {step:,}")
        else:
            self._message(f"{message}; training goes on (checkpoint.on_write_error: continue)")

    def _write_checkpoint(self, step: int, score: float | None) -> Checkpoint | None:
        with self._consistent_checkpoint(step):
            if self.rollback.gave_up:
                return None
            files = self.adapter.create_checkpoint_files(
                elapsed_time=self.elapsed_time(),
                total_rollbacks=self.rollback.total_rollbacks,
                run_name=self.run_name,
            )
        files.append(CheckpointFile.from_json(ROLLBACK_FILE, self.rollback.state_dict()))
        metrics = {k: v for k, v in self.memory.snapshot().items() if not k.startswith("perf/")}
        checkpoint = self.checkpoints.save(
            files,
            step=step,
            elapsed_time=self.elapsed_time(),
            run_name=self.run_name,
            metrics=metrics,
            score=score,
            extra={"algo": self.algo, "total_rollbacks": self.rollback.total_rollbacks},
        )
        self._last_checkpoint_step = step
        self._write_trajectories()
        return checkpoint

    def _roll_back_to(self, checkpoint: Checkpoint, lr_scale: float) -> int:
        step = self.adapter.restore_for_rollback(checkpoint)
        self.learner.set_lr_scale(lr_scale)
        return step

    def _score_of(self, result: EvaluationResult) -> float:
        return float(getattr(result, self.config.rollback.metric))

    def _on_evaluation(self, result: EvaluationResult) -> None:
        """An evaluation finished (tester thread): score its checkpoint, stop on the target
        return, else let the rollback controller watch it."""
        result.elapsed_s = self._evaluation_times.pop(result.step, result.elapsed_s)
        with contextlib.suppress(CheckpointError, OSError):
            self.checkpoints.set_score(result.step, result.ci95_low)
        self._message(
            f"eval at step {result.step:,}: {result.interval}, "
            f"score {result.mean_score:.1f}, "
            f"win rate {win_rate_text(result.win_rate, result.clean_win_rate)} "
            f"({result.episodes} episodes)"
        )
        target = self.config.target_eval_return
        if target is not None and result.mean_return >= target:
            self.context.request_stop(f"evaluation return {result.mean_return:.2f} >= {target:g}")
            return
        # The interval is of the return; a watched mean score is taken as it is.
        lower = result.ci95_low if self.config.rollback.metric == "mean_return" else None
        self.rollback.observe_evaluation(self._score_of(result), result.step, lower)

    # -- running --------------------------------------------------------------------------

    def elapsed_time(self) -> float:
        """Seconds of training over every session of this run."""
        return self._elapsed_before + (time.monotonic() - self._session_start)

    def _message(self, text: str) -> None:
        if self.console is not None:
            self.console.message(text)
        else:
            self._print(text)

    def request_stop(self, reason: str) -> None:
        """Ask the run to stop cleanly, as Ctrl-C does: the step finishes, the final
        checkpoint and the summary are written, and there is no final evaluation.

        Safe to call from a signal handler or any thread: it only sets a flag that the run
        loop reads (four times a second); an evaluation of the final phase is cut short.
        """
        if self._stop_request is None:
            self._stop_request = reason
        if self._final_phase and self._built:
            self.tester.abort()

    def run(self) -> dict[str, Any]:
        """Train until the step budget, a time limit, an early stop, `request_stop` or
        Ctrl-C; returns the summary (also written to `summary.json`).

        Raises:
            RunFailed: the run stopped on a fault (after its final checkpoint and summary).
        """
        self.build()
        try:
            return self._run()
        finally:
            self.close()

    def _run(self) -> dict[str, Any]:
        config, actor, context = self.config, self.actor, self.context
        self._print(f"run directory: {self.run_dir.resolve()}")
        if self._auto_choice is not None:
            self._print(f"observation:   auto chose {self._auto_choice.describe()}")
        novelty = actor.reward_shaping.novelty
        if novelty is not None and novelty.variables is not None:
            self._print(f"novelty cells: {novelty.variables.describe()}")
        if config.logging.tensorboard:
            self._print(f"TensorBoard:   tensorboard --logdir {self.tensorboard_dir.resolve()}")
        baseline = self._baseline()
        if baseline is not None:
            self.rollback.set_baseline(self._score_of(baseline))
        start_steps = actor.steps
        self._session_start = time.monotonic()
        interrupted = False
        self._start_algorithm()
        self.learner.start()
        if config.tester.enabled:
            self.tester.start()
        # An event, not Thread.join: a KeyboardInterrupt that lands inside join() can leave
        # the thread marked finished while it still runs.
        actor_done = threading.Event()
        actor_thread = threading.Thread(
            target=self._run_actor, args=(actor_done,), name="actor", daemon=True
        )
        actor_thread.start()
        try:
            while not actor_done.wait(0.25):
                if self._stop_request is not None:
                    context.request_stop(self._stop_request)
                if self.console is not None:
                    self.console.update(actor.steps)
                limit = config.max_time_s
                if limit is not None and time.monotonic() - self._session_start > limit:
                    context.request_stop(f"time limit of {limit:g} s")
        except RunAborted:
            raise
        except KeyboardInterrupt:
            interrupted = True
            context.request_stop("interrupted")
            actor_done.wait()
        self._final_phase = True
        if self._stop_request is not None:
            interrupted = True
            context.request_stop(self._stop_request)
        if not context.stopping:
            self._finish_budget()
        session_time = time.monotonic() - self._session_start
        context.request_stop()
        self._stop_algorithm()
        self.learner.join()
        if self.learner.running:
            self._print("warning: the learner thread did not stop")
        self.tester.stop(abort=True)
        self._check_errors(context.errors)
        reason = context.stop_reason or "step budget reached"
        if self._last_checkpoint_step != actor.steps and not self.rollback.gave_up:
            self.save_checkpoint(actor.steps)
        final: EvaluationResult | None = None
        if config.tester.enabled and not interrupted and self._fault is None:
            self.tester.sync_from_learner()
            with contextlib.suppress(EvaluationAborted):
                final = self.tester.evaluate(config.tester.final_episodes, step=actor.steps)
                self._record_final_evaluation(final, actor.steps)
        self.summary = self._summary(reason, baseline, final, start_steps, session_time)
        try:
            write_atomic(self.run_dir / SUMMARY_NAME, json.dumps(jsonable(self.summary), indent=2))
        except OSError as exc:
            self._fault = self._fault or f"summary.json not written: {exc}"
            self._print(f"summary.json not written: {exc}")
        self._report(reason, baseline, final)
        if self._fault is not None:
            raise RunFailed(self._fault, self.summary)
        return self.summary

    def _check_errors(self, errors: list[BaseException]) -> None:
        """Env worker faults beyond what restarts can mend stop the run cleanly (it goes on
        to its final checkpoint and summary); any other error fails it at once."""
        if not errors:
            return
        if not all(isinstance(e, MultiEnvError) for e in errors):
            error = next(e for e in errors if not isinstance(e, MultiEnvError))
            raise RuntimeError(f"the run failed: {error!r}") from error
        error = errors[0]
        assert isinstance(error, MultiEnvError)
        first, _, _ = str(error).partition("\n")
        cause = ""
        if error.worker_traceback:
            cause = "; the error: " + error.worker_traceback.strip().rsplit("\n", 1)[-1]
        self._fault = f"the env workers of {self.config.game} failed: {first}{cause}"
        self._message(f"stopping: {self._fault}")
        self.context.request_stop(f"env worker fault ({first})")

    def _run_actor(self, done: threading.Event) -> None:
        try:
            self.actor.run()
        except BaseException as exc:
            self.context.report_error(exc)
        finally:
            done.set()

    def _baseline(self) -> EvaluationResult | None:
        """The random policy's evaluation: played now for a new run, read back for a
        resumed one."""
        config = self.config
        if self.resume:
            return self._previous_baseline()
        if not (config.tester.enabled and config.tester.random_baseline):
            return None
        baseline = self.tester.evaluate(random_policy=True, step=0)
        self.metrics.scalar("eval/random_mean_return", baseline.mean_return, 0)
        self.metrics.scalar("eval/random_mean_score", baseline.mean_score, 0)
        self._print(
            f"random policy: mean return {baseline.mean_return:.2f}, "
            f"mean score {baseline.mean_score:.1f} ({baseline.episodes} episodes)"
        )
        return baseline

    def _previous_baseline(self) -> EvaluationResult | None:
        """The random-policy baseline of an earlier session of this run, if it has one."""
        summary = self.run_dir / SUMMARY_NAME
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(summary.read_text())["random_baseline"]
            if data:
                return EvaluationResult(**data)
        return None

    def _record_final_evaluation(self, final: EvaluationResult, step: int) -> None:
        """Log the final evaluation, score the checkpoint of `step` with it and keep it as
        the tester's best when it is."""
        self.metrics.scalar("eval/final_mean_return", final.mean_return, step)
        self.metrics.scalar("eval/final_mean_score", final.mean_score, step)
        with contextlib.suppress(CheckpointError, OSError):
            self.checkpoints.set_score(step, final.ci95_low)
        if is_better(final, self.tester.best):
            self.tester.best = final

    def _summary(
        self,
        reason: str,
        baseline: EvaluationResult | None,
        final: EvaluationResult | None,
        start_steps: int,
        session_time: float,
    ) -> dict[str, Any]:
        actor, config = self.actor, self.config
        last, best = self.checkpoints.latest(), self.checkpoints.best()
        best_eval = self.tester.best
        return {
            "run_name": self.run_name,
            "algo": self.algo,
            "game": config.game,
            "run_dir": str(self.run_dir.resolve()),
            "tensorboard_dir": str(self.tensorboard_dir.resolve()),
            "stop_reason": reason,
            "steps": actor.steps,
            "total_steps": config.total_steps,
            "resumed_from_step": self.restored.step if self.restored else None,
            "elapsed_s": self.elapsed_time(),
            "session_s": session_time,
            "env_steps_per_s": (actor.steps - start_steps) / max(session_time, 1e-9),
            "updates": self.learner.updates,
            "episodes": actor.total_episodes,
            "wins": actor.total_wins,
            "losses": actor.total_losses,
            "truncated": actor.total_truncated,
            "train_mean_return": self.memory.snapshot().get("episode/return_mean"),
            "random_baseline": baseline.to_dict() if baseline else None,
            "total_rollbacks": self.rollback.total_rollbacks,
            "rollbacks": list(self.rollback.history),
            "final_eval": final.to_dict() if final else None,
            "best_eval": best_eval.to_dict() if best_eval else None,
            "evaluations": [r.to_dict() for r in self.tester.results],
            "checkpoints": {
                "latest": str(last.path) if last else None,
                "best": str(best.path) if best else None,
            },
            "torch_threads": self.torch_threads,
            "worker_restarts": actor.worker_restarts,
            "first_win": actor.first_win,
            "init_from": self._init_from_record(),
            "fault": self._fault,
        } | self._summary_extra()

    def _report(
        self, reason: str, baseline: EvaluationResult | None, final: EvaluationResult | None
    ) -> None:
        actor = self.actor
        self._print(
            f"done ({reason}): {actor.steps:,} env steps, {self._counts()}, "
            f"{actor.total_episodes:,} episodes, {self.rollback.total_rollbacks} rollback(s)"
        )
        if self.rollback.gave_up:
            self._print(
                "no final checkpoint: training broke down; the newest checkpoint is the last "
                "good state"
            )
        if final is not None:
            line = (
                f"final {final.policy} evaluation: {final.interval}, "
                f"mean score {final.mean_score:.1f}, "
                f"win rate {win_rate_text(final.win_rate, final.clean_win_rate)} "
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
        if self._built:
            self._release()

    def _release(self) -> None:
        """Stop and release whatever has been built so far."""
        context = getattr(self, "context", None)
        if context is not None:
            context.request_stop()
        if hasattr(self, "learner"):
            self._stop_algorithm()
            self.learner.join(10)
        if hasattr(self, "tester"):
            self.tester.close()
        if hasattr(self, "env"):
            with contextlib.suppress(Exception):
                self.env.close()
        if hasattr(self, "metrics"):
            self.metrics.close()
