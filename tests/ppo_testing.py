"""Helpers for the PPO and rollback tests: a tiny deterministic env and wired-up components."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from oakemu_rl.envs.multi_env import OakEmuMultiEnv
from oakemu_rl.ppo.actor import PPOActor
from oakemu_rl.ppo.config import PPOExperimentConfiguration
from oakemu_rl.ppo.handshake import RolloutHandshake
from oakemu_rl.ppo.learner import PPOLearner
from oakemu_rl.ppo.model import PPOModel
from oakemu_rl.ppo.rollout_buffer import RolloutBuffer
from oakemu_rl.ppo.state_adapter import PPOStateAdapter
from oakemu_rl.runtime.checkpoints import CheckpointManager
from oakemu_rl.runtime.context import RuntimeContext
from oakemu_rl.runtime.metrics import MemorySink
from oakemu_rl.runtime.thread_safe_model import ThreadSafeModel


class CountingEnv(gym.Env[np.ndarray, int]):
    """Observation [t / 10, env_id]; reward 1 for action 1; terminates ('loss') at step
    `terminate_at` when given, else truncates at step `horizon`."""

    def __init__(self, env_id: int, horizon: int = 5, terminate_at: int | None = None) -> None:
        self.env_id = env_id
        self.horizon = horizon
        self.terminate_at = terminate_at
        self.observation_space = spaces.Box(-10.0, 10.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0
        self.total = 0.0

    def _obs(self) -> np.ndarray:
        return np.array([self.t / 10, self.env_id], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.t, self.total = 0, 0.0
        return self._obs(), {"score": 0.0}

    def step(self, action: int) -> Any:
        self.t += 1
        reward = float(action == 1)
        self.total += reward
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        truncated = not terminated and self.t >= self.horizon
        outcome = "loss" if terminated else "truncated" if truncated else None
        return self._obs(), reward, terminated, truncated, {"score": self.total, "outcome": outcome}


def counting_multi_env(num_envs: int) -> OakEmuMultiEnv:
    """Inline multi-env: even envs truncate at step 5, odd envs terminate at step 3."""
    return OakEmuMultiEnv(
        env_factory=lambda i: CountingEnv(i, 5, 3 if i % 2 else None),
        num_envs=num_envs,
        backend="inline",
        seed=0,
    )


def small_config(**overrides: Any) -> PPOExperimentConfiguration:
    data: dict[str, Any] = {
        "game": "gym:CartPole-v1",
        "total_steps": 64,
        "seed": 0,
        "env": {"num_envs": 4, "backend": "inline"},
        "ppo": {"rollout_steps": 8, "epochs": 2, "minibatches": 2, "learning_rate": 1e-3},
        "logging": {"tensorboard": False, "console": False},
    }
    for key, value in overrides.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    return PPOExperimentConfiguration.from_dict(data)


@dataclass
class Components:
    config: PPOExperimentConfiguration
    context: RuntimeContext[PPOExperimentConfiguration]
    learner_model: PPOModel
    actor_model: PPOModel
    container: ThreadSafeModel[PPOModel]
    optimizer: torch.optim.Adam
    buffer: RolloutBuffer
    handshake: RolloutHandshake
    actor: PPOActor
    learner: PPOLearner
    adapter: PPOStateAdapter
    checkpoints: CheckpointManager
    metrics: MemorySink


def build_components(
    tmp_path: Path,
    config: PPOExperimentConfiguration | None = None,
    *,
    weight_seed: int = 0,
    env_factory: Any = None,
    episode_observer: Any = None,
    observation_shape: tuple[int, ...] = (2,),
    num_actions: int = 2,
    observation_dtype: Any = np.float32,
    wait_at: Any = None,
) -> Components:
    """Actor, learner, state adapter and checkpoint manager (by default on a 2-input,
    2-action model for CountingEnv)."""
    config = config or small_config()
    metrics = MemorySink()
    context: RuntimeContext[PPOExperimentConfiguration] = RuntimeContext(
        config=config,
        device=torch.device("cpu"),
        run_dir=tmp_path,
        metrics=metrics,
        seed=config.seed,
    )
    torch.manual_seed(weight_seed)
    learner_model = PPOModel(observation_shape, num_actions)
    actor_model = PPOModel(observation_shape, num_actions)
    actor_model.load_state_dict(learner_model.state_dict())
    actor_model.requires_grad_(False)
    container = ThreadSafeModel(learner_model)
    optimizer = torch.optim.Adam(learner_model.parameters(), lr=config.ppo.learning_rate, eps=1e-5)
    buffer = RolloutBuffer(
        config.ppo.rollout_steps, config.env.num_envs, observation_shape, observation_dtype
    )
    handshake = RolloutHandshake(context.stop_event, wait_at=wait_at)
    num_envs = config.env.num_envs
    actor = PPOActor(
        context,
        actor_model,
        container,
        buffer,
        handshake,
        episode_observer=episode_observer,
        env_factory=env_factory or (lambda: counting_multi_env(num_envs)),
    )
    learner = PPOLearner(context, container, optimizer, buffer, handshake, lambda: actor.steps)
    adapter = PPOStateAdapter(
        config, learner_model, container, actor_model, optimizer, actor, learner, None, None
    )
    checkpoints = CheckpointManager(tmp_path / "checkpoints", keep_last=10, keep_best=3)
    return Components(
        config, context, learner_model, actor_model, container, optimizer, buffer, handshake,
        actor, learner, adapter, checkpoints, metrics,
    )  # fmt: skip


def fill_buffer(c: Components, seed: int = 0) -> None:
    """Fill the rollout buffer with synthetic steps (actions from the learner model)."""
    rng = np.random.default_rng(seed)
    buffer = c.buffer
    buffer.reset()
    for t in range(buffer.num_steps):
        obs = rng.normal(size=(buffer.num_envs, 2)).astype(np.float32)
        with torch.no_grad():
            bundle = c.learner_model.get_action_bundle(
                torch.from_numpy(obs), generator=torch.Generator().manual_seed(seed * 1000 + t)
            )
        for i in range(buffer.num_envs):
            buffer.add_action(
                i,
                obs[i],
                int(bundle.actions[i]),
                float(bundle.log_probs[i]),
                float(bundle.values[i]),
            )
            buffer.add_outcome(i, float(rng.normal()), bool(rng.random() < 0.1), False)
    for i in range(buffer.num_envs):
        buffer.set_last_value(i, float(rng.normal()))


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def fake_learner(handshake: RolloutHandshake, on_rollout: Any) -> threading.Thread:
    """A learner thread that calls `on_rollout()` for each rollout, then releases it."""

    def run() -> None:
        while handshake.wait_for_rollout():
            try:
                on_rollout()
            finally:
                handshake.release()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
