"""Environments: one game (OakEmuEnv), Gymnasium backends, and their registration.

Importing this package registers `oakemu/<game>` ids with Gymnasium, so
`gym.make("oakemu_rl.envs:oakemu/catch")` works from anywhere.
"""

from .episodic_life import EpisodicLife
from .factory import make_env
from .gym_backend import GymBackendEnv, is_gym_id
from .multi_env import MultiEnvError, OakEmuMultiEnv, StepResult
from .oakemu_env import OakEmuEnv
from .observation import ObservationConfig, ObservationPipeline
from .registration import register_envs

register_envs()

__all__ = [
    "EpisodicLife",
    "GymBackendEnv",
    "MultiEnvError",
    "OakEmuEnv",
    "OakEmuMultiEnv",
    "ObservationConfig",
    "ObservationPipeline",
    "StepResult",
    "is_gym_id",
    "make_env",
    "register_envs",
]
