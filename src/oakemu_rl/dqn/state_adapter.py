"""DQNStateAdapter: captures and restores DQN runtime state as checkpoint files."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import cast

from ..runtime.checkpoints import Checkpoint, CheckpointFile
from ..runtime.state_adapter import (
    ACTOR_FILE,
    CONFIG_FILE,
    LEARNER_FILE,
    MODEL_FILE,
    OPTIMIZER_FILE,
    RUN_FILE,
    RestoreMetadata,
    StateAdapterBase,
)
from .config import DQNExperimentConfiguration
from .learner import Learner
from .trainer import Trainer

__all__ = [
    "ACTOR_FILE",
    "CONFIG_FILE",
    "LEARNER_FILE",
    "MODEL_FILE",
    "OPTIMIZER_FILE",
    "REPLAY_FILE",
    "RUN_FILE",
    "DQNRestoreMetadata",
    "DQNStateAdapter",
]

REPLAY_FILE = "replay.npz"


@dataclass(frozen=True)
class DQNRestoreMetadata(RestoreMetadata):
    """What the experiment needs to know after a full restore."""

    replay_restored: bool

    def describe(self) -> str:
        replay = "restored" if self.replay_restored else "not saved (refilling)"
        return f"{super().describe()}, replay buffer {replay}"


class DQNStateAdapter(StateAdapterBase[DQNExperimentConfiguration]):
    """Captures and restores DQN-specific runtime state.

    The files of `StateAdapterBase`, the learner's target network and sampling RNG in
    `learner.pt`, and - with `checkpoint.save_replay_buffer` - the replay buffer
    (`replay.npz`). State is copied with the replay pipeline frozen and the learner held
    between updates, so that the counters and the buffer agree.

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

    algo = "dqn"

    @property
    def dqn_trainer(self) -> Trainer:
        """The DQN actor (its replay pipeline is frozen while state is copied)."""
        return cast(Trainer, self.trainer)

    @property
    def dqn_learner(self) -> Learner:
        """The DQN learner (held between updates while state is copied)."""
        return cast(Learner, self.learner)

    def _consistent(self) -> AbstractContextManager[None]:
        return self._frozen_and_held()

    @contextmanager
    def _frozen_and_held(self) -> Iterator[None]:
        with self.dqn_trainer.freeze_replay_pipeline(), self.dqn_learner.hold():
            yield

    def _extra_files(self) -> list[CheckpointFile]:
        if not self.config.checkpoint.save_replay_buffer:
            return []
        replay = self.dqn_trainer.replay_buffer.state_dict()
        return [CheckpointFile.from_numpy(REPLAY_FILE, replay)]

    def _after_learner_restore(self) -> None:
        self.dqn_trainer.policy.invalidate_sync()

    def restore_full(self, checkpoint: Checkpoint) -> DQNRestoreMetadata:
        """Restore the full experiment runtime state from a checkpoint.

        A replay buffer that was not saved refills first: learning resumes
        `learner.learning_starts` env steps after the checkpoint's step.
        """
        run_state = self._restore_common(checkpoint)
        replay_restored = self.config.checkpoint.save_replay_buffer and checkpoint.has(REPLAY_FILE)
        if replay_restored:
            with self.dqn_trainer.freeze_replay_pipeline():
                self.dqn_trainer.replay_buffer.load_state_dict(checkpoint.load_numpy(REPLAY_FILE))
        else:
            self.dqn_learner.refill_before_learning(self.trainer.steps)
        return DQNRestoreMetadata(
            **self._metadata_fields(run_state), replay_restored=replay_restored
        )
