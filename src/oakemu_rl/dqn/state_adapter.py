"""DQNStateAdapter: captures and restores DQN runtime state as checkpoint files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..runtime.checkpoints import Checkpoint, CheckpointError, CheckpointFile
from ..runtime.env_lifecycle import ActorRuntimeState
from ..runtime.thread_safe_model import ThreadSafeModel
from .config import DQNExperimentConfiguration
from .learner import Learner
from .tester import Tester
from .trainer import Trainer

CONFIG_FILE = "config.yaml"
MODEL_FILE = "model.pt"
OPTIMIZER_FILE = "optimizer.pt"
LEARNER_FILE = "learner.pt"
ACTOR_FILE = "actor_state.json"
RUN_FILE = "run_state.json"
REPLAY_FILE = "replay.npz"


@dataclass(frozen=True)
class DQNRestoreMetadata:
    """What the experiment needs to know after a full restore."""

    step: int
    elapsed_time: float
    total_rollbacks: int
    run_name: str
    learner_updates: int
    replay_restored: bool
    best_eval_return: float | None


def _clone(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in state.items()}


class DQNStateAdapter:
    """Captures and restores DQN-specific runtime state.

    Files: the learner, actor and tester weights (`model.pt`), the optimizer, the
    learner's counters, target network and sampling RNG (`learner.pt`), the trainer's
    counters, episode statistics, trajectories and RNGs (`actor_state.json`), run
    bookkeeping (`run_state.json`), the resolved config, and - when
    `checkpoint.save_replay_buffer` is set - the replay buffer (`replay.npz`).

    `create_checkpoint_files` freezes the replay pipeline and holds the learner between
    updates while it copies state; call it on the actor thread (a Trainer step hook)
    or while the actor is stopped, so that the counters and the buffer agree.

    Args:
        config: DQN experiment configuration.
        learner_model: Learner model module.
        learner_model_container: Thread-safe learner model wrapper.
        actor_model: Actor model module.
        optimizer: Optimizer used by the learner.
        trainer: Trainer runtime object.
        learner: Learner runtime object.
        tester: Optional tester runtime object.
        tester_model: Optional tester model module.
    """

    def __init__(
        self,
        config: DQNExperimentConfiguration,
        learner_model: nn.Module,
        learner_model_container: ThreadSafeModel[Any],
        actor_model: nn.Module,
        optimizer: torch.optim.Optimizer,
        trainer: Trainer,
        learner: Learner,
        tester: Tester | None,
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

    def create_checkpoint_files(
        self, *, elapsed_time: float, total_rollbacks: int, run_name: str
    ) -> list[CheckpointFile]:
        """Build the DQN checkpoint files for the current runtime state."""
        trainer, learner = self.trainer, self.learner
        with trainer.freeze_replay_pipeline(), learner.hold():
            with self.learner_model_container.read():
                models: dict[str, Any] = {
                    "learner": _clone(self.learner_model.state_dict()),
                    "actor": _clone(self.actor_model.state_dict()),
                    "version": self.learner_model_container.version,
                }
                optimizer_state = self.optimizer.state_dict()
                optimizer_file = CheckpointFile.from_torch(OPTIMIZER_FILE, optimizer_state)
            if self.tester_model is not None:
                models["tester"] = _clone(self.tester_model.state_dict())
            learner_state = learner.state_dict()
            learner_state["torch_rng"] = torch.get_rng_state()
            actor_state = trainer.runtime_state()
            best = self.tester.best if self.tester is not None else None
            run_state = {
                "step": actor_state.steps,
                "elapsed_time": float(elapsed_time),
                "total_rollbacks": int(total_rollbacks),
                "run_name": run_name,
                "context_rng": trainer.context.rng_state(),
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
            if self.config.checkpoint.save_replay_buffer:
                files.append(
                    CheckpointFile.from_numpy(REPLAY_FILE, trainer.replay_buffer.state_dict())
                )
        return files

    def _restore_learner(self, checkpoint: Checkpoint) -> dict[str, Any]:
        models = checkpoint.load_torch(MODEL_FILE)
        self.learner_model_container.load_state_dict(
            models["learner"], version=self.learner_model_container.version + 1
        )
        self.optimizer.load_state_dict(checkpoint.load_torch(OPTIMIZER_FILE))
        learner_state = checkpoint.load_torch(LEARNER_FILE)
        self.learner.load_state_dict(learner_state)
        self.trainer.policy.invalidate_sync()
        return {"models": models, "learner": learner_state}

    def restore_full(self, checkpoint: Checkpoint) -> DQNRestoreMetadata:
        """Restore the full experiment runtime state from a checkpoint."""
        for name in (MODEL_FILE, OPTIMIZER_FILE, LEARNER_FILE, ACTOR_FILE, RUN_FILE):
            if not checkpoint.has(name):
                raise CheckpointError(f"{checkpoint.path}: not a DQN checkpoint (no {name})")
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
        run_state = checkpoint.read_json(RUN_FILE)
        if run_state.get("context_rng"):
            self.trainer.context.set_rng_state(run_state["context_rng"])
        replay_restored = False
        if self.config.checkpoint.save_replay_buffer and checkpoint.has(REPLAY_FILE):
            with self.trainer.freeze_replay_pipeline():
                self.trainer.replay_buffer.load_state_dict(checkpoint.load_numpy(REPLAY_FILE))
            replay_restored = True
        best = run_state.get("best_eval")
        return DQNRestoreMetadata(
            step=actor_state.steps,
            elapsed_time=float(run_state.get("elapsed_time", 0.0)),
            total_rollbacks=int(run_state.get("total_rollbacks", 0)),
            run_name=str(run_state.get("run_name", "")),
            learner_updates=self.learner.updates,
            replay_restored=replay_restored,
            best_eval_return=None if not best else float(best["mean_return"]),
        )

    def restore_for_rollback(self, checkpoint: Checkpoint) -> int:
        """Restore only the learner/optimizer state required for automatic rollback.

        Returns the actor step recorded inside the restored checkpoint.
        """
        with self.learner.hold():
            self._restore_learner(checkpoint)
        return int(checkpoint.read_json(ACTOR_FILE)["steps"])
