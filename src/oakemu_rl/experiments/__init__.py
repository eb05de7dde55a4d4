"""Experiments: a training run built from its configuration (threads, checkpoints,
evaluation, rollback, summary), for DQN and PPO alike."""

from .algorithms import EXPERIMENTS
from .dqn_experiment import DQNExperiment
from .evaluation import evaluate_checkpoint, find_checkpoint
from .experiment import Experiment
from .ppo_experiment import PPOExperiment
from .run_directory import RunError, read_algo

__all__ = [
    "EXPERIMENTS",
    "DQNExperiment",
    "Experiment",
    "PPOExperiment",
    "RunError",
    "evaluate_checkpoint",
    "find_checkpoint",
    "read_algo",
]
