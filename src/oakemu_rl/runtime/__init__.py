"""Runtime core shared by DQN and PPO: context, model sharing, episodes, agents, checkpoints,
metrics."""

from .agent import Agent
from .checkpoints import Checkpoint, CheckpointError, CheckpointFile, CheckpointManager
from .context import RuntimeContext
from .env_lifecycle import ActorRuntimeState, EnvironmentState, EnvLifecycle
from .episode_metrics import EpisodeMetrics, EpisodeRecord, EpisodeTotals
from .metrics import ConsoleSink, MemorySink, MetricsSink, MultiSink, NullSink, TensorBoardSink
from .thread_safe_model import ThreadSafeModel

__all__ = [
    "ActorRuntimeState",
    "Agent",
    "Checkpoint",
    "CheckpointError",
    "CheckpointFile",
    "CheckpointManager",
    "ConsoleSink",
    "EnvLifecycle",
    "EnvironmentState",
    "EpisodeMetrics",
    "EpisodeRecord",
    "EpisodeTotals",
    "MemorySink",
    "MetricsSink",
    "MultiSink",
    "NullSink",
    "RuntimeContext",
    "TensorBoardSink",
    "ThreadSafeModel",
]
