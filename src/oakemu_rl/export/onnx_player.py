"""Play an exported policy with onnxruntime: no torch, no training code.

    policy = OnnxPolicy("policy.onnx")
    result = play_onnx(policy, episodes=10, seed=5)

Episodes are played one after another on one env: episode k is reset with env seed
`seed + k`, and an episode is cut after the policy's ``max_episode_steps``; so
`oakemu-rl evaluate RUN --seed S` plays the same episodes with the PyTorch model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..envs.factory import make_env
from ..envs.gym_backend import is_gym_id
from ..envs.lives import clean_win_rate, lives_lost
from ..games.loader import load_game
from .metadata import PolicyFileError, PolicyMetadata

FrameCallback = Callable[[Any, int, dict[str, Any], int], None]
"""Called after each step with (env, action, info, episode)."""


class OnnxPolicy:
    """An exported policy, run by onnxruntime on the CPU."""

    def __init__(self, path: str | Path) -> None:
        import onnxruntime as ort

        self.path = Path(path)
        if not self.path.is_file():
            raise PolicyFileError(f"{self.path}: no such policy file")
        try:
            self.session = ort.InferenceSession(str(self.path), providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PolicyFileError(f"{self.path}: not an ONNX model ({first})") from None
        props = self.session.get_modelmeta().custom_metadata_map
        self.metadata = PolicyMetadata.from_props(dict(props), str(self.path))

    def run(self, observations: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any]]:
        """(actions, scores) for a batch of observations."""
        actions, scores = self.session.run(None, {"observation": observations})
        return np.asarray(actions), np.asarray(scores)

    def act(self, observation: npt.NDArray[Any]) -> int:
        """The greedy action for one observation."""
        return int(self.run(observation[None])[0][0])


@dataclass
class PlayResult:
    """Episodes played with an exported policy."""

    returns: list[float] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    outcomes: list[str | None] = field(default_factory=list)
    lives_lost: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        n = len(self.returns)
        nan = float("nan")
        return {
            "episodes": n,
            "mean_return": float(np.mean(self.returns)) if n else nan,
            "mean_score": float(np.mean(self.scores)) if n else nan,
            "win_rate": float(np.mean([o == "win" for o in self.outcomes])) if n else nan,
            "clean_win_rate": clean_win_rate(self.outcomes, self.lives_lost),
            "mean_length": float(np.mean(self.lengths)) if n else nan,
            "returns": self.returns,
            "warnings": self.warnings,
        }


def observation_settings(metadata: PolicyMetadata) -> dict[str, Any] | None:
    """The observation configuration the policy was trained with (None for gym: envs)."""
    settings = dict(metadata.observation)
    kind = settings.pop("kind")
    if kind == "gym":
        return None
    for derived in ("shape", "dtype", "play_area"):
        settings.pop(derived, None)
    return settings | {"type": kind}


def check_game(metadata: PolicyMetadata, game: str) -> list[str]:
    """PolicyFileError when `game` cannot be played by the policy; warnings when it may."""
    if is_gym_id(game) or is_gym_id(metadata.game):
        if game != metadata.game:
            raise PolicyFileError(f"the policy plays {metadata.game}, not {game}")
        return []
    definition = load_game(game)
    actions = [list(keys) for keys in definition.spec.actions]
    if actions != metadata.actions:
        raise PolicyFileError(
            f"{game}: its actions {actions} are not the policy's {metadata.actions} "
            f"(it was trained on {metadata.game_name})"
        )
    digest = definition.yaml_sha256
    if digest != metadata.game_yaml_sha256:
        return [
            f"{definition.path} differs from the game YAML the policy was trained on "
            f"(sha256 {digest[:12]}... vs {str(metadata.game_yaml_sha256)[:12]}...)"
        ]
    return []


def play_onnx(
    policy: OnnxPolicy,
    game: str | None = None,
    episodes: int = 10,
    seed: int = 0,
    on_step: FrameCallback | None = None,
) -> PlayResult:
    """Play `episodes` greedy episodes of `game` (default: the policy's own)."""
    metadata = policy.metadata
    game = game or metadata.game
    result = PlayResult(warnings=check_game(metadata, game))
    env = make_env(game, observation_settings(metadata))
    try:
        shape = tuple(metadata.observation["shape"])
        space: Any = env.observation_space
        if tuple(space.shape) != shape:
            raise PolicyFileError(
                f"{game} gives observations of shape {space.shape}; the policy takes {shape}"
            )
        for episode in range(episodes):
            observation, info = env.reset(seed=seed + episode)
            total, length, outcome, lost = 0.0, 0, None, 0
            while True:
                action = policy.act(np.asarray(observation))
                lives = info.get("lives")
                observation, reward, terminated, truncated, info = env.step(action)
                lost += lives_lost(lives, info.get("lives"))
                total += float(reward)
                length += 1
                if on_step is not None:
                    on_step(env, action, info, episode)
                if terminated or truncated:
                    outcome = info.get("outcome")
                    break
                if length >= metadata.max_episode_steps:
                    outcome = "truncated"
                    break
            result.returns.append(total)
            result.scores.append(float(info.get("score") or 0.0))
            result.lengths.append(length)
            result.outcomes.append(outcome)
            result.lives_lost.append(lost)
    finally:
        env.close()
    return result
