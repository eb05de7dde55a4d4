"""DistillStateAdapter: captures and restores a distillation run's state as checkpoint
files, the aggregated dataset among them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from ..runtime.checkpoints import Checkpoint, CheckpointFile
from ..runtime.state_adapter import RestoreMetadata, StateAdapterBase
from .actor import DistillActor
from .config import DistillExperimentConfiguration

__all__ = ["DATASET_FILE", "DistillRestoreMetadata", "DistillStateAdapter"]

DATASET_FILE = "distill_dataset.npz"
"""The aggregated dataset in a checkpoint: arrays only (observations, targets, flags)."""


@dataclass(frozen=True)
class DistillRestoreMetadata(RestoreMetadata):
    """What the experiment needs to know after a full restore."""

    dataset_size: int

    def describe(self) -> str:
        return f"{super().describe()}, {self.dataset_size:,} labelled states restored"


class DistillStateAdapter(StateAdapterBase[DistillExperimentConfiguration]):
    """Captures and restores distillation runtime state.

    The files of `StateAdapterBase` (the student's weights in `model.pt`; the learner's
    update count, learning-rate scale and sampling RNG in `learner.pt`; the actor's
    label counts in `actor_state.json`), and the aggregated dataset (`DATASET_FILE`).
    Checkpoints are taken on the actor thread between two results, with the learner held
    between updates, so the dataset and the counters agree. A rollback restores the
    student and its optimizer only: the dataset keeps every label.

    Takes the arguments of `StateAdapterBase`; `trainer` is the `DistillActor`.
    """

    algo = "distill"

    @property
    def distill_actor(self) -> DistillActor:
        """The actor, which owns the dataset."""
        return cast(DistillActor, self.trainer)

    def _extra_files(self) -> list[CheckpointFile]:
        return [CheckpointFile.from_numpy(DATASET_FILE, self.distill_actor.dataset.state_dict())]

    def _restore_extra(self, checkpoint: Checkpoint) -> None:
        if checkpoint.has(DATASET_FILE):
            self.distill_actor.dataset.load_state_dict(checkpoint.load_numpy(DATASET_FILE))

    def restore_full(self, checkpoint: Checkpoint) -> DistillRestoreMetadata:
        """Restore the whole run's state from a checkpoint, the dataset included."""
        run_state = self._restore_common(checkpoint)
        return DistillRestoreMetadata(
            **self._metadata_fields(run_state), dataset_size=len(self.distill_actor.dataset)
        )
