"""The algorithms a run can use, by the name a configuration's `algo` gives."""

from __future__ import annotations

from typing import Any

from .distill_experiment import DistillExperiment
from .dqn_experiment import DQNExperiment
from .experiment import Experiment
from .ppo_experiment import PPOExperiment

EXPERIMENTS: dict[str, type[Experiment[Any]]] = {
    "dqn": DQNExperiment,
    "ppo": PPOExperiment,
    "distill": DistillExperiment,
}
"""The experiment class of each algorithm, by its name."""
