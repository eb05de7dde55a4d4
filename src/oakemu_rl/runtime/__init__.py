"""Runtime core shared by DQN, PPO and distill: configuration base, context, model sharing,
the actor and tester bases, the learner thread and its update-ratio gate, episodes, reward
shaping, checkpoints, rollback, metrics."""

from .actor import ActorBase
from .checkpoints import Checkpoint, CheckpointError, CheckpointFile, CheckpointManager
from .config_base import ConfigError, ExperimentConfiguration
from .context import RuntimeContext
from .env_lifecycle import ActorRuntimeState, EnvironmentState, EnvLifecycle
from .episode_metrics import EpisodeMetrics, EpisodeRecord, EpisodeTotals
from .learner_thread import LearnerThread
from .metrics import ConsoleSink, MemorySink, MetricsSink, MultiSink, NullSink, TensorBoardSink
from .replay_ratio_gate import ReplayRatioGate
from .reward_shaping import RewardShapingPipeline
from .state_adapter import RestoreMetadata, StateAdapterBase
from .thread_safe_model import ThreadSafeModel

__all__ = [
    "ActorBase",
    "ActorRuntimeState",
    "Checkpoint",
    "CheckpointError",
    "CheckpointFile",
    "CheckpointManager",
    "ConfigError",
    "ConsoleSink",
    "EnvLifecycle",
    "EnvironmentState",
    "EpisodeMetrics",
    "EpisodeRecord",
    "EpisodeTotals",
    "ExperimentConfiguration",
    "LearnerThread",
    "MemorySink",
    "MetricsSink",
    "MultiSink",
    "NullSink",
    "ReplayRatioGate",
    "RestoreMetadata",
    "RewardShapingPipeline",
    "RuntimeContext",
    "StateAdapterBase",
    "TensorBoardSink",
    "ThreadSafeModel",
]
