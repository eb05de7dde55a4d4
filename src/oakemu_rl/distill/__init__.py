"""Distillation (algo: distill): a student network imitates the emulator's search.

The search teacher (`trajectories.teacher`) labels, in the env workers, every state the
training envs reach with a soft target over actions; the `BetaSchedule` decides who acts
(the teacher, or more and more the student); the `DistillDataset` aggregates the labelled
states (DAgger), bounded in bytes; the `DistillLearner` trains the student, a `PPOModel`,
by `soft_cross_entropy` on them, or by `safe_set_nll` (`distill.loss`), with `StudentRefit`
refitting a fresh student on the side.
"""

from .actor import DistillActor, safe_choice_rate, teacher_agrees
from .config import DistillExperimentConfiguration, DistillSettings
from .dataset import DistillBatch, DistillDataset
from .learner import DistillLearner, NonFiniteDistillLossError
from .loss import safe_set_nll, soft_cross_entropy
from .refit import StudentRefit
from .schedule import BetaSchedule
from .state_adapter import DATASET_FILE, DistillRestoreMetadata, DistillStateAdapter

__all__ = [
    "DATASET_FILE",
    "BetaSchedule",
    "DistillActor",
    "DistillBatch",
    "DistillDataset",
    "DistillExperimentConfiguration",
    "DistillLearner",
    "DistillRestoreMetadata",
    "DistillSettings",
    "DistillStateAdapter",
    "NonFiniteDistillLossError",
    "StudentRefit",
    "safe_choice_rate",
    "safe_set_nll",
    "soft_cross_entropy",
    "teacher_agrees",
]
