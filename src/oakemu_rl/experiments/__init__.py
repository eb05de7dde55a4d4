"""Experiments: a run built from configuration (threads, checkpoints, evaluation, summary)."""

from .dqn_experiment import DQNExperiment, RunError, default_run_dir
from .evaluation import evaluate_checkpoint, find_checkpoint

__all__ = ["DQNExperiment", "RunError", "default_run_dir", "evaluate_checkpoint", "find_checkpoint"]
