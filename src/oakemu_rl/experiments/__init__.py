"""Experiments: a training run built from its configuration (threads, checkpoints,
evaluation, rollback, summary), for DQN, PPO and distillation alike."""

from .algorithms import EXPERIMENTS
from .distill_experiment import DistillExperiment
from .dqn_experiment import DQNExperiment
from .evaluation import evaluate_checkpoint, find_checkpoint
from .experiment import Experiment, RunFailed
from .ppo_experiment import PPOExperiment
from .run_directory import RunError, read_algo
from .stop_signals import stop_on_signals

__all__ = [
    "EXPERIMENTS",
    "DQNExperiment",
    "DistillExperiment",
    "Experiment",
    "PPOExperiment",
    "RunError",
    "RunFailed",
    "evaluate_checkpoint",
    "find_checkpoint",
    "read_algo",
    "stop_on_signals",
]
