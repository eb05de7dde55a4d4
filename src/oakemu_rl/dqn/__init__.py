"""DQN: configuration, model, exploration, replay, learner, trainer, tester, checkpoints."""

from ..runtime.config_base import ConfigError
from ..runtime.replay_ratio_gate import ReplayRatioGate
from ..runtime.reward_shaping import RewardShapingPipeline
from .action_masker import ActionMasker
from .action_policy import ActionPolicy
from .config import DQNExperimentConfiguration
from .exploration import (
    ExplorationStrategy,
    ExponentialEpsilonGreedy,
    LinearEpsilonGreedy,
    NoisyNetExploration,
)
from .learner import Learner
from .model import DQNModel
from .noisy import NoisyLinear
from .replay_buffer import ReplayBatch, ReplayBuffer, Transition
from .replay_writer import ReplayWriter
from .state_adapter import DQNRestoreMetadata, DQNStateAdapter
from .sum_tree import SumTree
from .td_loss import TDLoss, td_loss
from .tester import EvaluationResult, Tester
from .trainer import Trainer

__all__ = [
    "ActionMasker",
    "ActionPolicy",
    "ConfigError",
    "DQNExperimentConfiguration",
    "DQNModel",
    "DQNRestoreMetadata",
    "DQNStateAdapter",
    "EvaluationResult",
    "ExplorationStrategy",
    "ExponentialEpsilonGreedy",
    "Learner",
    "LinearEpsilonGreedy",
    "NoisyLinear",
    "NoisyNetExploration",
    "ReplayBatch",
    "ReplayBuffer",
    "ReplayRatioGate",
    "ReplayWriter",
    "RewardShapingPipeline",
    "SumTree",
    "TDLoss",
    "Tester",
    "Trainer",
    "Transition",
    "td_loss",
]
