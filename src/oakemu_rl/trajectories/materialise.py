"""Rebuilding a trajectory's observations and machine states by replaying it.

The emulator is deterministic: a trajectory's start (seed or machine state) and its
actions give back every observation bit for bit. `replay` walks an env along a
trajectory and checks each reward against the recording, so a trajectory that no longer
fits its game (a changed snapshot, another observation of a different machine) is
reported at the step where it diverges instead of teaching something wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from ..envs.oakemu_env import OakEmuEnv
from .trajectory_file import Trajectory, TrajectoryFileError

__all__ = ["ReplayedStep", "TrajectoryStates", "materialise", "replay", "states_along"]


@dataclass
class ReplayedStep:
    """Step `index` of a replay: the observation before the action and what followed."""

    index: int
    observation: npt.NDArray[Any]
    action: int
    reward: float
    next_observation: npt.NDArray[Any]
    terminated: bool
    truncated: bool
    info: dict[str, Any]


def start(env: OakEmuEnv, trajectory: Trajectory) -> tuple[npt.NDArray[Any], dict[str, Any]]:
    """Reset `env` to the trajectory's start."""
    if trajectory.start_state is not None:
        return env.reset(state=trajectory.start_state)
    return env.reset(options={"episode_seed": trajectory.start_seed})


def replay(
    env: OakEmuEnv, trajectory: Trajectory, *, stop: int | None = None, tolerance: float = 1e-4
) -> Iterator[ReplayedStep]:
    """Step `env` along `trajectory` (up to step `stop`), yielding each step.

    Raises TrajectoryFileError where a replayed reward differs from the recorded one.
    """
    observation, _ = start(env, trajectory)
    observation = observation.copy()
    end = trajectory.length if stop is None else min(stop, trajectory.length)
    for index in range(end):
        action = int(trajectory.actions[index])
        if not 0 <= action < env.num_actions:
            raise TrajectoryFileError(
                f"step {index}: action {action} is outside the game's 0..{env.num_actions - 1}"
            )
        next_observation, reward, terminated, truncated, info = env.step(action)
        next_observation = next_observation.copy()
        if abs(reward - float(trajectory.rewards[index])) > tolerance:
            raise TrajectoryFileError(
                f"replaying the trajectory diverged at step {index}: reward {reward:g}, "
                f"recorded {float(trajectory.rewards[index]):g} (was it recorded with "
                "another version of the game?)"
            )
        yield ReplayedStep(
            index, observation, action, float(reward), next_observation, terminated, truncated, info
        )
        if (terminated or truncated) and index + 1 < end:
            raise TrajectoryFileError(
                f"replaying the trajectory ended at step {index + 1} of {trajectory.length}"
            )
        observation = next_observation


def materialise(
    env: OakEmuEnv, trajectory: Trajectory, steps: list[int] | None = None
) -> dict[int, npt.NDArray[Any]]:
    """The observations seen before `steps` of the trajectory (all steps, and the final
    observation at index `length`, when None), by replaying it in `env`."""
    wanted = set(range(trajectory.length + 1)) if steps is None else {int(s) for s in steps}
    for s in wanted:
        if not 0 <= s <= trajectory.length:
            raise IndexError(f"step {s} is outside the trajectory's 0..{trajectory.length}")
    found: dict[int, npt.NDArray[Any]] = {}
    last = max(wanted, default=-1)
    if last < 0:
        return found
    if last == 0:
        observation, _ = start(env, trajectory)
        return {0: observation.copy()}
    for step in replay(env, trajectory, stop=last):
        if step.index in wanted:
            found[step.index] = step.observation
        if step.index + 1 in wanted:
            found[step.index + 1] = step.next_observation
    return found


@dataclass
class TrajectoryStates:
    """Machine states along a trajectory: `states[i]` is the state before step `steps[i]`,
    when the episode had collected `returns[i]` and the game's variables read `values[i]`."""

    steps: list[int]
    states: list[bytes]
    returns: list[float]
    values: list[dict[str, int]]

    def __len__(self) -> int:
        return len(self.steps)


def states_along(env: OakEmuEnv, trajectory: Trajectory, every: int) -> TrajectoryStates:
    """Save the machine state every `every` steps along a trajectory (from step 0)."""
    if every < 1:
        raise ValueError(f"every must be at least 1, got {every}")
    found = TrajectoryStates([], [], [], [])
    _, info = start(env, trajectory)
    collected = 0.0
    values = dict(info.get("values") or {})
    found.steps.append(0)
    found.states.append(env.save_state())
    found.returns.append(0.0)
    found.values.append(values)
    for step in replay(env, trajectory):
        collected += step.reward
        index = step.index + 1
        if index % every == 0 and not (step.terminated or step.truncated):
            found.steps.append(index)
            found.states.append(env.save_state())
            found.returns.append(collected)
            found.values.append(dict(step.info.get("values") or {}))
    return found
