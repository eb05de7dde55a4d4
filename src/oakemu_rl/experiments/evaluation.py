"""Evaluate a trained agent of either algorithm: episodes on fresh envs with a checkpoint's
learner weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from ..dqn.tester import Tester
from ..ppo.tester import PPOTester
from ..runtime.checkpoints import MANIFEST, Checkpoint, CheckpointError, CheckpointManager
from ..runtime.config_base import ExperimentConfiguration
from ..runtime.context import RuntimeContext
from ..runtime.env_owner import EnvFactory, make_multi_env
from ..runtime.state_adapter import CONFIG_FILE, MODEL_FILE
from ..runtime.tester import EvaluationResult
from .algorithms import EXPERIMENTS
from .experiment import Experiment
from .policy import GreedyPolicy
from .run_directory import RunError
from .torch_setup import resolve_device, torch_threads_beside


class PolicyOptionError(ValueError):
    """An evaluation option the agent's algorithm does not have: `option` (the keyword's
    name) and `reason`, which the message joins."""

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"{option} {reason}")
        self.option = option
        self.reason = reason


#: Default env seed offset of `evaluate_checkpoint`, apart from training and tester envs.
EVALUATION_SEED_OFFSET = 2_000_003


def find_checkpoint(target: str | Path, *, best: bool = False) -> Checkpoint:
    """A checkpoint directory, or the newest valid (or, with `best`, the best-scored,
    else the newest) checkpoint of a run directory."""
    path = Path(target)
    if not path.exists():
        raise RunError(f"{path}: no such run directory or checkpoint")
    if (path / MANIFEST).is_file():
        return Checkpoint.open(path)
    root = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    manager = CheckpointManager(root)
    checkpoint = manager.best() if best else None
    checkpoint = checkpoint or manager.latest()
    if checkpoint is None:
        raise RunError(f"{path}: no valid checkpoint found")
    return checkpoint


def read_checkpoint_config(
    checkpoint: Checkpoint, *, allow_code: bool = False
) -> tuple[type[Experiment[Any]], ExperimentConfiguration]:
    """The experiment class and the configuration of the run a checkpoint belongs to."""
    if not checkpoint.has(CONFIG_FILE) or not checkpoint.has(MODEL_FILE):
        raise RunError(f"{checkpoint.path}: not a checkpoint of a run (no config.yaml or model.pt)")
    source = str(checkpoint.file(CONFIG_FILE))
    try:
        data = yaml.safe_load(checkpoint.read_bytes(CONFIG_FILE))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CheckpointError(f"{source}: cannot be read: {exc}") from None
    algo = str(data.get("algo", "dqn")) if isinstance(data, dict) else "dqn"
    if algo not in EXPERIMENTS:
        raise RunError(
            f"{checkpoint.path}: unknown algo {algo!r} (expected one of {', '.join(EXPERIMENTS)})"
        )
    experiment = EXPERIMENTS[algo]
    config = experiment.config_type.from_dict(data, source=source)
    config.check_code_allowed(allow_code, source)
    return experiment, config


def load_checkpoint_model(
    checkpoint: Checkpoint,
    config: ExperimentConfiguration,
    observation_shape: tuple[int, ...],
    num_actions: int,
    device: torch.device | str = "cpu",
) -> nn.Module:
    """The learner's network of a checkpoint, in eval mode, without gradients."""
    experiment = EXPERIMENTS[config.algo]
    model = experiment.build_model(config, observation_shape, num_actions).to(device)
    weights = checkpoint.load_torch(MODEL_FILE, map_location=device)
    try:
        model.load_state_dict(weights["learner"])
    except (KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointError(
            f"{checkpoint.file(MODEL_FILE)}: does not hold this run's model: {exc}"
        ) from None
    return model.eval().requires_grad_(False)


def checkpoint_policy(
    checkpoint: Checkpoint, config: ExperimentConfiguration, env: Any
) -> GreedyPolicy:
    """The greedy policy of a checkpoint's network, shaped for `env`'s spaces (CPU)."""
    space: Any = env.observation_space
    num_actions = int(getattr(env.action_space, "n", 0))
    shape = tuple(int(s) for s in space.shape)
    model = load_checkpoint_model(checkpoint, config, shape, num_actions)
    return GreedyPolicy(model, num_actions, config.env.allowed_actions).eval()


def evaluate_checkpoint(
    checkpoint: Checkpoint | str | Path,
    episodes: int | None = None,
    *,
    seed: int | None = None,
    epsilon: float | None = None,
    deterministic: bool | None = None,
    random_policy: bool = False,
    num_envs: int | None = None,
    backend: str | None = None,
    env_factory: EnvFactory | None = None,
    allow_code: bool = False,
) -> EvaluationResult:
    """Play `episodes` episodes (default: the run's `tester.episodes`) with the learner
    weights of a checkpoint, on fresh envs.

    Args:
        checkpoint: a Checkpoint, a checkpoint directory, or a run directory (its newest
            valid checkpoint; `find_checkpoint(run_dir, best=True)` picks the best).
        episodes: how many episodes.
        seed: the first env seed (default: the run's seed + EVALUATION_SEED_OFFSET).
        epsilon: DQN only: chance of a random action (default: `tester.epsilon`).
        deterministic: PPO and distill: take the most likely action instead of sampling
            (default: `tester.deterministic`).
        random_policy: play random actions instead (a baseline).
        num_envs: envs played at once (default: `tester.num_envs`).
        backend: 'process' or 'inline' (default: the run's `env.backend`).
        env_factory: builds the multi-env instead.
        allow_code: run Python code the checkpoint's configuration names (refused by
            default with CodeNotAllowedError; see `Experiment`).
    """
    if not isinstance(checkpoint, Checkpoint):
        checkpoint = find_checkpoint(checkpoint)
    experiment, config = read_checkpoint_config(checkpoint, allow_code=allow_code)
    if experiment.algo != "dqn" and epsilon is not None:
        raise PolicyOptionError(
            "epsilon", f"applies to DQN agents; a {experiment.algo} agent plays its policy"
        )
    if experiment.algo == "dqn" and deterministic is not None:
        raise PolicyOptionError(
            "deterministic", "applies to PPO and distill agents; a DQN agent plays greedily"
        )
    episodes = episodes or config.tester.episodes
    data = config.model_dump(mode="json")
    data["tester"]["num_envs"] = max(1, min(episodes, num_envs or config.tester.num_envs))
    if backend is not None:
        data["env"]["backend"] = backend
    config = experiment.config_type.from_dict(data)
    env_seed = config.seed + EVALUATION_SEED_OFFSET if seed is None else seed
    tester_envs = config.tester.num_envs
    env = (
        env_factory()
        if env_factory is not None
        else make_multi_env(config, num_envs=tester_envs, seed_offset=env_seed - config.seed)
    )
    try:
        device = resolve_device(config.device)
        shape = tuple(int(s) for s in env.observation_space.shape)
        model = load_checkpoint_model(checkpoint, config, shape, int(env.action_space.n), device)
        context: RuntimeContext[Any] = RuntimeContext(
            config=config, device=device, run_dir=checkpoint.path, seed=env_seed
        )
        workers = 0 if env.backend == "inline" else env.num_workers
        context.torch_threads = torch_threads_beside(config.torch_threads, workers)
        tester = experiment.tester_type(context, model, env_factory=lambda: env)
        # Play on this thread with the torch threads the workers leave free (all of them
        # would spin and starve the workers), and give the caller back its own count.
        caller_threads = torch.get_num_threads()
        context.enter_thread()
        try:
            if isinstance(tester, Tester):
                return tester.evaluate(
                    episodes, random_policy=random_policy, epsilon=epsilon, step=checkpoint.step
                )
            assert isinstance(tester, PPOTester)
            return tester.evaluate(
                episodes,
                random_policy=random_policy,
                deterministic=deterministic,
                step=checkpoint.step,
            )
        finally:
            torch.set_num_threads(caller_threads)
    finally:
        env.close()
