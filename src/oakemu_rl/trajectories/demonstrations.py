"""Demonstrations for a run: trajectory files checked against the game and replayed on demand.

`DemonstrationSet.load` reads trajectory files (or directories of them) and refuses any
recorded with another game YAML. Once `prepare` has replayed each demonstration, saving
machine states every `stride` steps, an observation at any step is rebuilt by restoring
the nearest earlier state and replaying at most `stride - 1` actions (`observation`), so
no demonstration needs its observations kept in memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..envs.oakemu_env import OakEmuEnv
from ..envs.observation import ObservationConfig
from ..games.loader import GameDefinition
from .materialise import ReplayedStep, TrajectoryStates, replay, start, states_along
from .trajectory_file import Trajectory, TrajectoryFileError, load_trajectories

__all__ = ["Demonstration", "DemonstrationSet"]


@dataclass
class Demonstration:
    """One demonstration of a run: its id (its index in the set), file and trajectory."""

    id: int
    path: Path
    trajectory: Trajectory
    states: TrajectoryStates | None = field(default=None, repr=False)

    @property
    def length(self) -> int:
        return self.trajectory.length


class DemonstrationSet:
    """The demonstrations of a run, replayable in a private env of this process.

    Thread-safe: replays from different threads take turns on the private env.

    Args:
        demonstrations: the demonstrations (ids are their indices).
        game: the game they were recorded with.
        observation_config: what the agent sees (observations are rebuilt with it).
        stride: steps between the machine states saved along each demonstration.
    """

    def __init__(
        self,
        demonstrations: list[Demonstration],
        game: GameDefinition,
        observation_config: ObservationConfig,
        stride: int = 50,
    ) -> None:
        if stride < 1:
            raise ValueError(f"stride must be at least 1, got {stride}")
        self.demonstrations = demonstrations
        self.game = game
        self.observation_config = observation_config
        self.stride = stride
        self._env: OakEmuEnv | None = None
        self._lock = threading.RLock()

    @classmethod
    def load(
        cls,
        sources: list[str] | list[Path],
        game: GameDefinition,
        observation_config: ObservationConfig,
        stride: int = 50,
    ) -> DemonstrationSet:
        """Read every trajectory under `sources`; each must be of `game`'s YAML."""
        sha = game.yaml_sha256
        found = load_trajectories(sources)
        if not found:
            raise TrajectoryFileError(
                f"no trajectory files (*.trajectory.json) under {', '.join(map(str, sources))}"
            )
        demonstrations = []
        for i, (path, trajectory) in enumerate(found):
            trajectory.check_game(game.name, sha, str(path))
            if trajectory.length == 0:
                raise TrajectoryFileError(f"{path}: the trajectory has no steps")
            demonstrations.append(Demonstration(i, path, trajectory))
        return cls(demonstrations, game, observation_config, stride)

    def __len__(self) -> int:
        return len(self.demonstrations)

    def __getitem__(self, demo_id: int) -> Demonstration:
        return self.demonstrations[demo_id]

    def __iter__(self) -> Iterator[Demonstration]:
        return iter(self.demonstrations)

    @property
    def total_steps(self) -> int:
        """Steps over all demonstrations."""
        return sum(d.length for d in self.demonstrations)

    @property
    def env(self) -> OakEmuEnv:
        """The private env demonstrations are replayed in (made on first use)."""
        if self._env is None:
            self._env = OakEmuEnv(self.game, self.observation_config)
        return self._env

    def close(self) -> None:
        with self._lock:
            if self._env is not None:
                self._env.close()
                self._env = None

    # -- replaying ------------------------------------------------------------------------

    def prepare(self, progress: Callable[[int], None] | None = None) -> None:
        """Replay each demonstration once, checking it and saving states along it."""
        for demo in self.demonstrations:
            self.states(demo.id)
            if progress is not None:
                progress(demo.length)

    def states(self, demo_id: int) -> TrajectoryStates:
        """The states saved along a demonstration (replays it on first use)."""
        demo = self.demonstrations[demo_id]
        with self._lock:
            if demo.states is None:
                try:
                    demo.states = states_along(self.env, demo.trajectory, self.stride)
                except TrajectoryFileError as exc:
                    raise TrajectoryFileError(f"{demo.path}: {exc}") from None
            return demo.states

    def steps(self, demo_id: int) -> list[ReplayedStep]:
        """Every step of a demonstration, replayed (observations, actions, rewards)."""
        demo = self.demonstrations[demo_id]
        with self._lock:
            try:
                return list(replay(self.env, demo.trajectory))
            except TrajectoryFileError as exc:
                raise TrajectoryFileError(f"{demo.path}: {exc}") from None

    def observations(self, demo_id: int, steps: list[int]) -> dict[int, npt.NDArray[Any]]:
        """The observations before `steps` of a demonstration, each rebuilt from the
        nearest saved state (frame stacks included: the replay starts far enough back)."""
        with self._lock:
            return self._observations(demo_id, steps)

    def _observations(self, demo_id: int, steps: list[int]) -> dict[int, npt.NDArray[Any]]:
        demo = self.demonstrations[demo_id]
        saved = self.states(demo_id)
        env = self.env
        actions = demo.trajectory.actions
        found: dict[int, npt.NDArray[Any]] = {}
        # A restored state's frame stack holds copies of its one frame; after stack - 1
        # replayed steps it holds real frames only. So start at least that far back.
        back = self.observation_config.frame_stack - 1
        at = -1  # the step the env is at (its observation is `observation`), -1: none
        observation: npt.NDArray[Any] | None = None
        for step in sorted({int(s) for s in steps}):
            if not 0 <= step < demo.length:
                raise IndexError(
                    f"step {step} is outside demonstration {demo_id}'s 0..{demo.length - 1}"
                )
            index = max(int(np.searchsorted(saved.steps, step - back, side="right")) - 1, 0)
            if not saved.steps[index] <= at <= step:
                # Jump to the nearest saved state (else go on from where the env is).
                at = saved.steps[index]
                if at == 0:
                    observation, _ = start(env, demo.trajectory)
                else:
                    observation, _ = env.reset(state=saved.states[index])
            while at < step:
                observation, *_ = env.step(int(actions[at]))
                at += 1
            assert observation is not None
            found[step] = observation.copy()
        return found
