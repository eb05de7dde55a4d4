"""Export a trained agent's greedy policy to ONNX, with what it needs to play inside.

The graph takes a batch of observations exactly as the env gives them (uint8 screens or
float vectors, any batch size) and returns ``action`` (the greedy action of each row,
int64, allowed actions only) and ``scores`` (DQN's Q-values or PPO's logits). The file's
metadata says what game it plays and how to build its observations (see
`oakemu_rl.export.metadata`), so `oakemu-rl play-onnx` and any onnxruntime user can play
it without this package's training code, or torch.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

from ..envs.factory import make_env
from ..envs.gym_backend import is_gym_id
from ..envs.observation_choice import choose_observation
from ..experiments.evaluation import checkpoint_policy, find_checkpoint, read_checkpoint_config
from ..games.loader import load_game
from ..runtime.checkpoints import Checkpoint
from ..runtime.config_base import ExperimentConfiguration
from .metadata import FORMAT_VERSION, PolicyMetadata

OPSET = 18
"""The ONNX opset of exported policies (torch's exporter writes 18 natively)."""
MIN_OPSET = 17

# torch's exporter reports, as warnings, that torchvision's operators are not registered
# (we use none) and a deprecation inside torch's own pytree code: nothing a user can act
# on. They are silenced for the length of an export only.
_EXPORTER_LOGGER = "torch.onnx._internal.exporter._registration"


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    logger = logging.getLogger(_EXPORTER_LOGGER)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec")
            yield
    finally:
        logger.setLevel(level)


@dataclass(frozen=True)
class ExportedPolicy:
    """What `export_policy` wrote."""

    path: Path
    checkpoint: Checkpoint
    metadata: PolicyMetadata


def export_policy(
    target: str | Path | Checkpoint,
    out: str | Path,
    *,
    allow_code: bool = False,
    opset: int = OPSET,
) -> ExportedPolicy:
    """Write the greedy policy of `target` (a checkpoint, or a run directory's best
    checkpoint) to `out` as ONNX, checked with `onnx.checker`, with its metadata."""
    if opset < MIN_OPSET:
        raise ValueError(f"opset {opset}: exported policies need opset {MIN_OPSET} or newer")
    checkpoint = target if isinstance(target, Checkpoint) else find_checkpoint(target, best=True)
    _, config = read_checkpoint_config(checkpoint, allow_code=allow_code)
    env = make_env(config.game, config.env.observation)
    try:
        space: Any = env.observation_space
        policy = checkpoint_policy(checkpoint, config, env)
    finally:
        env.close()
    shape = tuple(int(s) for s in space.shape)
    example = torch.as_tensor(np.zeros((2, *shape), dtype=space.dtype))
    metadata = describe(config, checkpoint, shape, str(space.dtype), policy.num_actions)
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp")
    batch = torch.export.Dim("batch")
    with torch.no_grad(), _quiet_exporter():
        program = torch.onnx.export(
            policy,
            (example,),
            input_names=["observation"],
            output_names=["action", "scores"],
            dynamic_shapes=({0: batch},),
            opset_version=opset,
            dynamo=True,
            verbose=False,
        )
    assert program is not None
    program.save(str(tmp))
    proto = onnx.load(str(tmp))
    onnx.helper.set_model_props(proto, metadata.to_props())
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, str(tmp))
    os.replace(tmp, out)
    return ExportedPolicy(out, checkpoint, metadata)


def describe(
    config: ExperimentConfiguration,
    checkpoint: Checkpoint,
    shape: tuple[int, ...],
    dtype: str,
    num_actions: int,
) -> PolicyMetadata:
    """The metadata of a policy trained with `config`."""
    if is_gym_id(config.game):
        name, yaml_hash, play_area = config.game, None, None
        actions: list[list[str]] = [[str(i)] for i in range(num_actions)]
        observation: dict[str, Any] = {"kind": "gym"}
    else:
        game = load_game(config.game)
        name = game.spec.name
        yaml_hash = game.yaml_sha256
        actions = [list(keys) for keys in game.spec.actions]
        area = game.spec.play_area
        play_area = {"x": area.x, "y": area.y, "width": area.width, "height": area.height}
        # `auto` is stored as what it chose, so a player needs no choice of its own.
        observation = choose_observation(config.env.observation, game).config.model_dump(
            mode="json"
        )
        observation["kind"] = observation.pop("type")
    observation.update(shape=list(shape), dtype=dtype, play_area=play_area)
    return PolicyMetadata(
        format=FORMAT_VERSION,
        game=config.game,
        game_name=name,
        game_yaml_sha256=yaml_hash,
        actions=actions,
        allowed_actions=config.env.allowed_actions,
        observation=observation,
        algo=config.algo,
        checkpoint_step=checkpoint.step,
        max_episode_steps=config.tester.max_episode_steps,
    )
