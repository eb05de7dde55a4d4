"""PPOStateAdapter: captures and restores PPO runtime state as checkpoint files."""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..runtime.checkpoints import Checkpoint, CheckpointError, CheckpointFile
from ..runtime.env_lifecycle import ActorRuntimeState
from ..runtime.protocols import ActorRuntime, LearnerRuntime, TesterRuntime
from ..runtime.thread_safe_model import ThreadSafeModel
from .config import PPOExperimentConfiguration

__all__ = ["PPORestoreMetadata", "PPOStateAdapter"]

CONFIG_FILE = "config.yaml"
MODEL_FILE = "model.pt"
OPTIMIZER_FILE = "optimizer.pt"
LEARNER_FILE = "learner.pt"
ACTOR_FILE = "actor_state.json"
RUN_FILE = "run_state.json"
RESTART_POOL_FILE = "restart_pool.json"
REQUIRED_FILES = (MODEL_FILE, OPTIMIZER_FILE, LEARNER_FILE, ACTOR_FILE, RUN_FILE)


@dataclass(frozen=True)
class PPORestoreMetadata:
    """What the experiment needs to know after a full restore."""

    step: int
    elapsed_time: float
    total_rollbacks: int
    run_name: str
    learner_updates: int
    rollouts: int
    best_eval_return: float | None
    rollback_state: dict[str, Any]


def _clone(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in state.items()}


class PPOStateAdapter:
    """Captures and restores PPO-specific runtime state.

    Files: the learner, actor and tester weights (`model.pt`), the optimizer, the
    learner's counters, learning-rate scale and RNGs (`learner.pt`), the actor's
    counters, episode statistics, trajectories and RNGs (`actor_state.json`), run
    bookkeeping with `total_rollbacks` (`run_state.json`), the restart pool when there
    is one, and the resolved config. PPO checkpoints are taken between rollouts, so
    the (empty) rollout buffer is not saved.

    `create_checkpoint_files` holds the learner between rollouts while it copies
    state; call it from a learner rollout hook or while the threads are stopped.

    Args:
        config: PPO experiment configuration.
        learner_model: Learner model module.
        learner_model_container: Thread-safe learner model wrapper.
        actor_model: Actor model module.
        optimizer: Optimizer used by the learner.
        trainer: Trainer runtime object (the PPOActor).
        learner: Learner runtime object.
        tester: Optional tester runtime object.
        tester_model: Optional tester model module.
    """

    def __init__(
        self,
        config: PPOExperimentConfiguration,
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
        self.rollback_state: dict[str, Any] = {}
        """Extra rollback-controller state the experiment wants kept in run_state.json."""

    def _hold_learner(self) -> AbstractContextManager[None]:
        hold = getattr(self.learner, "hold", None)
        return hold() if callable(hold) else contextlib.nullcontext()

    def create_checkpoint_files(
        self, *, elapsed_time: float, total_rollbacks: int, run_name: str
    ) -> list[CheckpointFile]:
        """Build the PPO-specific checkpoint files for the current runtime state.

        Args:
            elapsed_time: Total elapsed experiment time.
            total_rollbacks: Total number of performed rollbacks.
            run_name: The run name to persist.

        Returns:
            The list of checkpoint files to save.
        """
        with self._hold_learner():
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
                "context_rng": _context_rng(self.trainer),
                "best_eval": best.to_dict() if best is not None else None,
                "rollback": self.rollback_state,
            }
            files = [
                CheckpointFile(CONFIG_FILE, self.config.to_yaml().encode()),
                CheckpointFile.from_torch(MODEL_FILE, models),
                optimizer_file,
                CheckpointFile.from_torch(LEARNER_FILE, learner_state),
                CheckpointFile.from_json(ACTOR_FILE, actor_state.to_dict()),
                CheckpointFile.from_json(RUN_FILE, run_state),
            ]
            pool = getattr(self.trainer, "restart_pool", None)
            if pool is not None:
                files.append(CheckpointFile.from_json(RESTART_POOL_FILE, pool.state_dict()))
        return files

    def _check(self, checkpoint: Checkpoint) -> None:
        for name in REQUIRED_FILES:
            if not checkpoint.has(name):
                raise CheckpointError(f"{checkpoint.path}: not a PPO checkpoint (no {name})")

    def _restore_learner(self, checkpoint: Checkpoint) -> dict[str, Any]:
        models = checkpoint.load_torch(MODEL_FILE)
        self.learner_model_container.load_state_dict(
            models["learner"], version=self.learner_model_container.version + 1
        )
        self.optimizer.load_state_dict(checkpoint.load_torch(OPTIMIZER_FILE))
        learner_state = checkpoint.load_torch(LEARNER_FILE)
        self.learner.load_state_dict(learner_state)
        return {"models": models, "learner": learner_state}

    def restore_full(self, checkpoint: Checkpoint) -> PPORestoreMetadata:
        """Restore full experiment runtime state from a checkpoint.

        Args:
            checkpoint: The checkpoint to restore from.

        Returns:
            Metadata needed by the experiment after restore.
        """
        self._check(checkpoint)
        with self._hold_learner():
            loaded = self._restore_learner(checkpoint)
            models = loaded["models"]
            self.actor_model.load_state_dict(models["actor"])
            if self.tester_model is not None and "tester" in models:
                self.tester_model.load_state_dict(models["tester"])
            torch_rng = loaded["learner"].get("torch_rng")
            if torch_rng is not None:
                torch.set_rng_state(torch_rng)
            actor_state = ActorRuntimeState.from_dict(checkpoint.read_json(ACTOR_FILE))
            self.trainer.restore_runtime_state(actor_state)
            pool = getattr(self.trainer, "restart_pool", None)
            if pool is not None and checkpoint.has(RESTART_POOL_FILE):
                pool.load_state_dict(checkpoint.read_json(RESTART_POOL_FILE))
            run_state = checkpoint.read_json(RUN_FILE)
            context = getattr(self.trainer, "context", None)
            if run_state.get("context_rng") and context is not None:
                context.set_rng_state(run_state["context_rng"])
        best = run_state.get("best_eval")
        learner_state = loaded["learner"]
        return PPORestoreMetadata(
            step=actor_state.steps,
            elapsed_time=float(run_state.get("elapsed_time", 0.0)),
            total_rollbacks=int(run_state.get("total_rollbacks", 0)),
            run_name=str(run_state.get("run_name", "")),
            learner_updates=int(learner_state.get("updates", 0)),
            rollouts=int(learner_state.get("rollouts", 0)),
            best_eval_return=None if not best else float(best["mean_return"]),
            rollback_state=dict(run_state.get("rollback") or {}),
        )

    def restore_for_rollback(self, checkpoint: Checkpoint) -> int:
        """Restore only the learner/optimizer state required for automatic rollback.

        The learner keeps its update count (updates are not undone, they are counted);
        the actor picks up the restored weights at its next rollout.

        Args:
            checkpoint: The checkpoint selected for rollback.

        Returns:
            The actor step recorded inside the restored checkpoint.
        """
        self._check(checkpoint)
        with self._hold_learner():
            models = checkpoint.load_torch(MODEL_FILE)
            self.learner_model_container.load_state_dict(
                models["learner"], version=self.learner_model_container.version + 1
            )
            self.optimizer.load_state_dict(checkpoint.load_torch(OPTIMIZER_FILE))
            learner_state = checkpoint.load_torch(LEARNER_FILE)
            generator = getattr(self.learner, "generator", None)
            if isinstance(generator, torch.Generator) and "generator" in learner_state:
                generator.set_state(learner_state["generator"])
        return int(checkpoint.read_json(ACTOR_FILE)["steps"])


def _context_rng(trainer: ActorRuntime) -> dict[str, Any] | None:
    context = getattr(trainer, "context", None)
    return context.rng_state() if context is not None else None
