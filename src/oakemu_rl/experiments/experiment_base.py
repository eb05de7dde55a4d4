"""ExperimentBase: what a DQN run and a PPO run share around their algorithm.

The run directory and its metrics sinks, the runtime context, the clock that carries on
across resumes, stopping with a reason, and the random-policy baseline kept in
`summary.json`. The algorithm's experiment builds its threads on top.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

import torch

from ..runtime.checkpoints import Checkpoint, CheckpointManager
from ..runtime.config_base import ExperimentConfiguration
from ..runtime.context import RuntimeContext
from ..runtime.metrics import ConsoleSink, MemorySink, MultiSink
from ..runtime.tester import EvaluationResult
from .run_directory import SUMMARY_NAME, RunSettings, new_run_dir, open_run_directory
from .torch_setup import resolve_device

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv

ConfigT = TypeVar("ConfigT", bound=ExperimentConfiguration)
EnvFactory = Callable[[], "OakEmuMultiEnv"]


class ExperimentBase(Generic[ConfigT]):
    """The parts of a run every algorithm shares.

    Args:
        config: the run's configuration.
        run_dir: where the run's files go (default: runs/<game>-<algo>-<time>).
        resume: continue the run in `run_dir` from its newest valid checkpoint.
        console: show the progress display (default: `config.logging.console`).
        env_factory: builds the training multi-env (default: from the config).
        tester_env_factory: builds the tester's multi-env (default: from the config).
        print_fn: where the run's messages go.
    """

    algo = "base"
    """The algorithm's name in run-directory names."""

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
    ) -> None:
        settings = self._settings(config)
        self.config = config
        self.run_dir = (
            Path(run_dir)
            if run_dir is not None
            else new_run_dir(settings.game, self.algo, settings.run_name)
        )
        self.resume = resume
        self.show_console = settings.logging.console if console is None else console
        self._env_factory = env_factory
        self._tester_env_factory = tester_env_factory
        self._print = print_fn or (lambda text: print(text, flush=True))
        self.run_name = settings.run_name or self.run_dir.name
        self.memory = MemorySink()
        self.summary: dict[str, Any] = {}
        self._manager_lock = threading.RLock()
        self._built = False
        self._stop_reason: str | None = None
        self._last_checkpoint_step: int | None = None
        self._elapsed_before = 0.0
        self._session_start = time.monotonic()

    @staticmethod
    def _settings(config: ConfigT) -> _RunConfig:
        return cast(_RunConfig, config)  # both algorithms' configurations have these fields

    def _open_run(self) -> tuple[RuntimeContext[ConfigT], Checkpoint | None]:
        """Open the run directory and its sinks and create the runtime context (seeded).

        Returns the context and the checkpoint to resume from (None for a new run).
        """
        settings = self._settings(self.config)
        opened = open_run_directory(
            self.run_dir,
            settings,
            resume=self.resume,
            show_console=self.show_console,
            memory=self.memory,
            print_fn=self._print,
        )
        self.checkpoints: CheckpointManager = opened.checkpoints
        self.metrics: MultiSink = opened.metrics
        self.console: ConsoleSink | None = opened.console
        self.tensorboard_dir = opened.tensorboard_dir
        torch.manual_seed(settings.seed)
        context: RuntimeContext[ConfigT] = RuntimeContext(
            config=self.config,
            device=resolve_device(settings.device),
            run_dir=self.run_dir,
            metrics=self.metrics,
            seed=settings.seed,
        )
        self.context = context
        return context, opened.resume_from

    def elapsed_time(self) -> float:
        """Seconds of training over every session of this run."""
        return self._elapsed_before + (time.monotonic() - self._session_start)

    def _give_up(self, message: str) -> None:
        """Stop the run with `message` as its reason (the first reason stays)."""
        if self._stop_reason is None:
            self._stop_reason = message
        self.context.request_stop()

    def _previous_baseline(self) -> EvaluationResult | None:
        """The random-policy baseline of an earlier session of this run, if it has one."""
        summary = self.run_dir / SUMMARY_NAME
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(summary.read_text())["random_baseline"]
            if data:
                return EvaluationResult(**data)
        return None


class _RunConfig(RunSettings, Protocol):
    """The settings ExperimentBase reads (both algorithms' configurations have them)."""

    @property
    def game(self) -> str: ...
    @property
    def run_name(self) -> str | None: ...
    @property
    def seed(self) -> int: ...
    @property
    def device(self) -> str: ...
