"""Recording trajectories for tests: play a bundled game with a scripted or random choice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from oakemu_rl.envs.oakemu_env import OakEmuEnv
from oakemu_rl.envs.observation import ObservationConfig
from oakemu_rl.games.loader import GameDefinition
from oakemu_rl.trajectories.trajectory_file import Trajectory, game_file_label

Choose = Callable[[dict[str, int], np.random.Generator], int]
NOOP, LEFT, RIGHT = 0, 1, 2  # catch.yaml's actions: [], [O], [P]


def catch_policy(values: dict[str, int], rng: np.random.Generator | None = None) -> int:
    """Catch, scripted: move the basket (left end paddle_x, 6 wide, 0..26) under the ball."""
    target = min(max(values["ball_x"] - 2, 0), 26)
    if values["paddle_x"] < target:
        return RIGHT
    return LEFT if values["paddle_x"] > target else NOOP


def random_policy(num_actions: int) -> Choose:
    return lambda values, rng: int(rng.integers(num_actions))


def record(
    game: GameDefinition,
    observation: ObservationConfig,
    choose: Choose,
    *,
    seed: int,
    path: Path | None = None,
    max_steps: int | None = None,
    source: str = "demo",
) -> tuple[Trajectory, list[np.ndarray[Any, Any]]]:
    """Play one episode with `choose(values, rng) -> action` (stopping after `max_steps`);
    returns its trajectory (saved to `path` when given) and the observations seen."""
    env = OakEmuEnv(game, observation, seed=seed)
    rng = np.random.default_rng(seed)
    first, info = env.reset()
    observations = [first.copy()]
    values = info["values"]
    actions: list[int] = []
    rewards: list[float] = []
    outcome = None
    while max_steps is None or len(actions) < max_steps:
        action = choose(values, rng)
        obs, reward, terminated, truncated, step_info = env.step(action)
        actions.append(action)
        rewards.append(reward)
        observations.append(obs.copy())
        values = step_info["values"]
        if terminated or truncated:
            outcome = step_info["outcome"]
            break
    env.close()
    trajectory = Trajectory(
        game=game.name,
        game_file=game_file_label(game),
        game_sha256=game.yaml_sha256,
        actions=np.array(actions),
        rewards=np.array(rewards),
        start_seed=info["episode_seed"],
        outcome=outcome,
        episode_return=float(sum(rewards)),
        source=source,
    )
    if path is not None:
        trajectory.save(path)
    return trajectory, observations
