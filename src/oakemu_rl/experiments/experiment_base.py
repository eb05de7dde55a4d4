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

from ..runtime.checkpoints import Checkpoint, CheckpointError, CheckpointManager
from ..runtime.config_base import ExperimentConfiguration
from ..runtime.context import RuntimeContext
from ..runtime.metrics import ConsoleSink, MemorySink, MultiSink
from ..runtime.rollback import RollbackController
from ..runtime.tester import EvaluationResult, TesterBase
from .run_directory import SUMMARY_NAME, RunSettings, new_run_dir, open_run_directory
from .torch_setup import resolve_device, retain_freed_memory

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
    """The algorithm's name in run-directory names and summaries."""
    restored: _Restored | None = None
    """What a resumed run restored (None for a new run)."""
    # Built by the algorithm's experiment:
    tester: TesterBase[Any]
    rollback: RollbackController
    torch_threads: int

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
        retain_freed_memory()
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

    def _record_final_evaluation(self, final: EvaluationResult, step: int) -> None:
        """Log the final evaluation, score the checkpoint of `step` with it and keep it as
        the tester's best when it is."""
        self.metrics.scalar("eval/final_mean_return", final.mean_return, step)
        self.metrics.scalar("eval/final_mean_score", final.mean_score, step)
        with self._manager_lock, contextlib.suppress(CheckpointError, OSError):
            self.checkpoints.set_score(step, final.mean_return)
        if self.tester.best is None or final.mean_return > self.tester.best.mean_return:
            self.tester.best = final

    def _summary_fields(
        self,
        *,
        steps: int,
        start_steps: int,
        session_time: float,
        updates: int,
        episodes: tuple[int, int, int, int],
        baseline: EvaluationResult | None,
        final: EvaluationResult | None,
    ) -> dict[str, Any]:
        """The `summary.json` fields every algorithm writes; `episodes` is (episodes,
        wins, losses, truncated). The algorithm's experiment adds its own."""
        with self._manager_lock:
            last = self.checkpoints.latest()
            best = self.checkpoints.best()
        best_eval = self.tester.best
        total, wins, losses, truncated = episodes
        return {
            "run_name": self.run_name,
            "algo": self.algo,
            "game": self._settings(self.config).game,
            "run_dir": str(self.run_dir.resolve()),
            "tensorboard_dir": str(self.tensorboard_dir.resolve()),
            "stop_reason": self._stop_reason,
            "steps": steps,
            "total_steps": self._settings(self.config).total_steps,
            "resumed_from_step": self.restored.step if self.restored else None,
            "elapsed_s": self.elapsed_time(),
            "session_s": session_time,
            "env_steps_per_s": (steps - start_steps) / max(session_time, 1e-9),
            "updates": updates,
            "episodes": total,
            "wins": wins,
            "losses": losses,
            "truncated": truncated,
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
        }

    def _previous_baseline(self) -> EvaluationResult | None:
        """The random-policy baseline of an earlier session of this run, if it has one."""
        summary = self.run_dir / SUMMARY_NAME
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(summary.read_text())["random_baseline"]
            if data:
                return EvaluationResult(**data)
        return None


class _Restored(Protocol):
    @property
    def step(self) -> int: ...


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
