"""PPOStateAdapter: captures and restores PPO runtime state as checkpoint files."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.checkpoints import Checkpoint
from ..runtime.state_adapter import RestoreMetadata, StateAdapterBase
from .config import PPOExperimentConfiguration

__all__ = ["PPORestoreMetadata", "PPOStateAdapter"]


@dataclass(frozen=True)
class PPORestoreMetadata(RestoreMetadata):
    """What the experiment needs to know after a full restore."""

    rollouts: int

    def describe(self) -> str:
        return f"{self.rollouts:,} rollouts, {super().describe()}"


class PPOStateAdapter(StateAdapterBase[PPOExperimentConfiguration]):
    """Captures and restores PPO-specific runtime state.

    The files of `StateAdapterBase`, with the learner's rollout count, learning-rate
    scale and minibatch RNG in `learner.pt`. PPO checkpoints are taken between
    rollouts, so the (empty) rollout buffer is not saved.

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

    algo = "ppo"

    def restore_full(self, checkpoint: Checkpoint) -> PPORestoreMetadata:
        """Restore full experiment runtime state from a checkpoint.

        Args:
            checkpoint: The checkpoint to restore from.

        Returns:
            Metadata needed by the experiment after restore.
        """
        run_state = self._restore_common(checkpoint)
        rollouts = int(self.learner.state_dict().get("rollouts", 0))
        return PPORestoreMetadata(**self._metadata_fields(run_state), rollouts=rollouts)
