"""Evaluate a trained DQN checkpoint: greedy episodes on fresh envs."""

from __future__ import annotations

from pathlib import Path

import torch
import yaml

from ..dqn.config import DQNExperimentConfiguration
from ..dqn.state_adapter import CONFIG_FILE, MODEL_FILE
from ..dqn.tester import EvaluationResult, Tester
from ..dqn.trainer import make_multi_env
from ..runtime.checkpoints import MANIFEST, Checkpoint, CheckpointManager
from ..runtime.context import RuntimeContext
from .dqn_experiment import RunError, build_model, resolve_device

#: Default env seed offset of `evaluate_checkpoint`, apart from training and tester envs.
EVALUATION_SEED_OFFSET = 2_000_003


def find_checkpoint(target: str | Path, *, best: bool = False) -> Checkpoint:
    """A checkpoint directory, or the newest valid (or best) checkpoint of a run directory."""
    path = Path(target)
    if not path.exists():
        raise RunError(f"{path}: no such run directory or checkpoint")
    if (path / MANIFEST).is_file():
        return Checkpoint.open(path)
    root = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    manager = CheckpointManager(root)
    checkpoint = manager.best() if best else manager.latest()
    if checkpoint is None and best:
        checkpoint = manager.latest()
    if checkpoint is None:
        raise RunError(f"{path}: no valid checkpoint found")
    return checkpoint


def evaluate_checkpoint(
    checkpoint: Checkpoint,
    episodes: int,
    *,
    seed: int | None = None,
    epsilon: float | None = None,
    num_envs: int | None = None,
    backend: str | None = None,
) -> EvaluationResult:
    """Play `episodes` episodes with the checkpoint's learner weights."""
    if not checkpoint.has(CONFIG_FILE) or not checkpoint.has(MODEL_FILE):
        raise RunError(f"{checkpoint.path}: not a DQN checkpoint")
    config = DQNExperimentConfiguration.from_dict(
        yaml.safe_load(checkpoint.read_bytes(CONFIG_FILE)),
        source=str(checkpoint.file(CONFIG_FILE)),
    )
    tester_envs = max(1, min(episodes, num_envs or config.tester.num_envs))
    data = config.model_dump(mode="json")
    data["tester"]["num_envs"] = tester_envs
    if backend is not None:
        data["env"]["backend"] = backend
    config = DQNExperimentConfiguration.from_dict(data)
    env_seed = (config.seed + EVALUATION_SEED_OFFSET) if seed is None else seed
    env = make_multi_env(config, num_envs=tester_envs, seed_offset=env_seed - config.seed)
    try:
        device = resolve_device(config.device)
        shape = tuple(int(s) for s in env.observation_space.shape)
        model = build_model(config, shape, int(env.action_space.n)).to(device)
        model.load_state_dict(checkpoint.load_torch(MODEL_FILE, map_location=device)["learner"])
        model.eval().requires_grad_(False)
        context: RuntimeContext[DQNExperimentConfiguration] = RuntimeContext(
            config=config, device=device, run_dir=checkpoint.path, seed=env_seed
        )
        context.torch_threads = max(1, torch.get_num_threads())
        tester = Tester(context, model, env_factory=lambda: env)
        return tester.evaluate(episodes, epsilon=epsilon, step=checkpoint.step)
    finally:
        env.close()
