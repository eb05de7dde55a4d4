"""StateAdapterBase: a run's state as checkpoint files, and back, for every algorithm.

Files: the learner, actor and tester weights (`model.pt`), the optimizer
(`optimizer.pt`), the learner's counters and RNGs (`learner.pt`, with torch's global
RNG), the actor's counters, episode statistics, trajectories and RNGs
(`actor_state.json`), run bookkeeping (`run_state.json`), the restart pool when there is
one (`restart_pool.json`) and the resolved config (`config.yaml`). An algorithm adds
its own files (DQN: the replay buffer).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch
from torch import nn

from .checkpoints import Checkpoint, CheckpointError, CheckpointFile
from .config_base import ExperimentConfiguration
from .env_lifecycle import ActorRuntimeState
from .protocols import ActorRuntime, LearnerRuntime, TesterRuntime
from .thread_safe_model import ThreadSafeModel

CONFIG_FILE = "config.yaml"
MODEL_FILE = "model.pt"
OPTIMIZER_FILE = "optimizer.pt"
LEARNER_FILE = "learner.pt"
ACTOR_FILE = "actor_state.json"
RUN_FILE = "run_state.json"
RESTART_POOL_FILE = "restart_pool.json"
REQUIRED_FILES = (MODEL_FILE, OPTIMIZER_FILE, LEARNER_FILE, ACTOR_FILE, RUN_FILE)


@dataclass(frozen=True)
class RestoreMetadata:
    """What the experiment needs to know after a full restore."""

    step: int
    elapsed_time: float
    total_rollbacks: int
    run_name: str
    learner_updates: int
    best_eval_return: float | None

    def describe(self) -> str:
        """What was restored, for the resume message."""
        return f"{self.learner_updates:,} updates"


def _clone(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in state.items()}


ConfigT = TypeVar("ConfigT", bound=ExperimentConfiguration)


class StateAdapterBase(Generic[ConfigT]):
    """Captures and restores a run's runtime state as checkpoint files.

    `create_checkpoint_files` holds the learner between updates (`_consistent`) while it
    copies state; call it where the actor is not mid-step (a step hook, a rollout hook)
    or while the threads are stopped.

    Args:
        config: the run's configuration.
        learner_model: Learner model module.
        learner_model_container: Thread-safe learner model wrapper.
        actor_model: Actor model module.
        optimizer: Optimizer used by the learner.
        trainer: the actor runtime object.
        learner: Learner runtime object.
        tester: Optional tester runtime object.
        tester_model: Optional tester model module.
    """

    algo = ""
    """The algorithm's name in messages about checkpoints that are not its own."""

    def __init__(
        self,
        config: ConfigT,
        learner_model: nn.Module,
        learner_model_container: ThreadSafeModel[Any],
        actor_model: nn.Module,
        optimizer: torch.optim.Optimizer,
        trainer: ActorRuntime,
        learner: LearnerRuntime,
        tester: TesterRuntime | None,
        tester_model: nn.Module | None,
    ) -> None:
        self.config = config
        self.learner_model = learner_model
        self.learner_model_container = learner_model_container
        self.actor_model = actor_model
        self.optimizer = optimizer
        self.trainer = trainer
        self.learner = learner
        self.tester = tester
        self.tester_model = tester_model

    # -- what an algorithm adds -----------------------------------------------------------

    def _consistent(self) -> AbstractContextManager[None]:
        """Held while state is copied: no update (and no insert) changes it meanwhile."""
        return self.learner.hold()

    def _extra_files(self) -> list[CheckpointFile]:
        """The algorithm's own checkpoint files."""
        return []

    def _restore_extra(self, checkpoint: Checkpoint) -> None:
        """Restore what `_extra_files` wrote (during `restore_full`)."""

    def _after_learner_restore(self) -> None:
        """Called after the learner's weights were replaced (restore or rollback)."""

    # -- checkpoint files -----------------------------------------------------------------

    def create_checkpoint_files(
        self, *, elapsed_time: float, total_rollbacks: int, run_name: str
    ) -> list[CheckpointFile]:
        """Build the checkpoint files for the current runtime state.

        Args:
            elapsed_time: Total elapsed experiment time.
            total_rollbacks: Total number of performed rollbacks.
            run_name: The run name to persist.

        Returns:
            The list of checkpoint files to save.
        """
        with self._consistent():
            with self.learner_model_container.read():
                models: dict[str, Any] = {
                    "learner": _clone(self.learner_model.state_dict()),
                    "actor": _clone(self.actor_model.state_dict()),
                    "version": self.learner_model_container.version,
                }
                optimizer_file = CheckpointFile.from_torch(
                    OPTIMIZER_FILE, self.optimizer.state_dict()
                )
            if self.tester_model is not None:
                models["tester"] = _clone(self.tester_model.state_dict())
            learner_state = self.learner.state_dict()
            learner_state["torch_rng"] = torch.get_rng_state()
            actor_state = self.trainer.runtime_state()
            best = self.tester.best if self.tester is not None else None
            run_state = {
                "step": actor_state.steps,
                "elapsed_time": float(elapsed_time),
                "total_rollbacks": int(total_rollbacks),
                "run_name": run_name,
                "context_rng": self.trainer.context.rng_state(),
                "best_eval": best.to_dict() if best is not None else None,
            }
            files = [
                CheckpointFile(CONFIG_FILE, self.config.to_yaml().encode()),
                CheckpointFile.from_torch(MODEL_FILE, models),
                optimizer_file,
                CheckpointFile.from_torch(LEARNER_FILE, learner_state),
                CheckpointFile.from_json(ACTOR_FILE, actor_state.to_dict()),
                CheckpointFile.from_json(RUN_FILE, run_state),
            ]
            pool = self.trainer.restart_pool
            if pool is not None:
                files.append(CheckpointFile.from_json(RESTART_POOL_FILE, pool.state_dict()))
            files += self._extra_files()
        return files

    # -- restoring ------------------------------------------------------------------------

    def _check(self, checkpoint: Checkpoint) -> None:
        for name in REQUIRED_FILES:
            if not checkpoint.has(name):
                raise CheckpointError(
                    f"{checkpoint.path}: not a {self.algo.upper()} checkpoint (no {name})"
                )

    def _restore_learner(self, checkpoint: Checkpoint, *, keep_counters: bool) -> dict[str, Any]:
        models = checkpoint.load_torch(MODEL_FILE)
        self.learner_model_container.load_state_dict(
            models["learner"], version=self.learner_model_container.version + 1
        )
        self.optimizer.load_state_dict(checkpoint.load_torch(OPTIMIZER_FILE))
        learner_state = checkpoint.load_torch(LEARNER_FILE)
        self.learner.load_state_dict(learner_state, keep_counters=keep_counters)
        self._after_learner_restore()
        return {"models": models, "learner": learner_state}

    def _restore_common(self, checkpoint: Checkpoint) -> dict[str, Any]:
        """Restore everything every algorithm checkpoints; returns run_state.json."""
        self._check(checkpoint)
        with self._consistent():
            loaded = self._restore_learner(checkpoint, keep_counters=False)
            models = loaded["models"]
            self.actor_model.load_state_dict(models["actor"])
            if self.tester_model is not None and "tester" in models:
                self.tester_model.load_state_dict(models["tester"])
            torch_rng = loaded["learner"].get("torch_rng")
            if torch_rng is not None:
                torch.set_rng_state(torch_rng)
            actor_state = ActorRuntimeState.from_dict(checkpoint.read_json(ACTOR_FILE))
            self.trainer.restore_runtime_state(actor_state)
            pool = self.trainer.restart_pool
            if pool is not None and checkpoint.has(RESTART_POOL_FILE):
                pool.load_state_dict(checkpoint.read_json(RESTART_POOL_FILE))
            run_state: dict[str, Any] = checkpoint.read_json(RUN_FILE)
            if run_state.get("context_rng"):
                self.trainer.context.set_rng_state(run_state["context_rng"])
            self._restore_extra(checkpoint)
        return run_state

    def _metadata_fields(self, run_state: dict[str, Any]) -> dict[str, Any]:
        """The `RestoreMetadata` fields every algorithm's metadata has."""
        best = run_state.get("best_eval")
        return {
            "step": self.trainer.steps,
            "elapsed_time": float(run_state.get("elapsed_time", 0.0)),
            "total_rollbacks": int(run_state.get("total_rollbacks", 0)),
            "run_name": str(run_state.get("run_name", "")),
            "learner_updates": self.learner.updates,
            "best_eval_return": None if not best else float(best["mean_return"]),
        }

    def restore_full(self, checkpoint: Checkpoint) -> RestoreMetadata:
        """Restore full experiment runtime state from a checkpoint.

        Args:
            checkpoint: The checkpoint to restore from.

        Returns:
            Metadata needed by the experiment after restore.
        """
        return RestoreMetadata(**self._metadata_fields(self._restore_common(checkpoint)))

    def restore_for_rollback(self, checkpoint: Checkpoint) -> int:
        """Restore only the learner/optimizer state required for automatic rollback.

        The learner keeps its counters (updates are not undone, they are counted); the
        actor picks up the restored weights at its next sync.

        Args:
            checkpoint: The checkpoint selected for rollback.

        Returns:
            The actor step recorded inside the restored checkpoint.
        """
        self._check(checkpoint)
        with self.learner.hold():
            self._restore_learner(checkpoint, keep_counters=True)
        return int(checkpoint.read_json(ACTOR_FILE)["steps"])
