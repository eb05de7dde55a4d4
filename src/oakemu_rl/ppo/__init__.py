"""PPO: configuration, actor-critic model, rollout buffer, handshake, actor, learner, tester,
checkpoints."""

from .actor import PPOActor
from .bc import BCMaterialisationSource, MaterialisationRequest, ReplayObservationCache
from .config import PPOExperimentConfiguration
from .handshake import RolloutHandshake
from .learner import NonFiniteLossError, PPOLearner
from .model import ActionBundle, PPOModel
from .rollout_buffer import RolloutBatch, RolloutBuffer, compute_gae
from .state_adapter import PPORestoreMetadata, PPOStateAdapter
from .tester import PPOTester

__all__ = [
    "ActionBundle",
    "BCMaterialisationSource",
    "MaterialisationRequest",
    "NonFiniteLossError",
    "PPOActor",
    "PPOExperimentConfiguration",
    "PPOLearner",
    "PPOModel",
    "PPORestoreMetadata",
    "PPOStateAdapter",
    "PPOTester",
    "ReplayObservationCache",
    "RolloutBatch",
    "RolloutBuffer",
    "RolloutHandshake",
    "compute_gae",
]
