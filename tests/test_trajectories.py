"""Trajectory files, materialisation, the restart pool, backplay and search demonstrations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oakemu_rl.envs.oakemu_env import OakEmuEnv
from oakemu_rl.envs.observation import ObservationConfig
from oakemu_rl.games.loader import load_game
from oakemu_rl.trajectories.backplay import Backplay
from oakemu_rl.trajectories.demonstrations import DemonstrationSet
from oakemu_rl.trajectories.materialise import materialise, replay
from oakemu_rl.trajectories.restart_pool import RestartPool
from oakemu_rl.trajectories.search import SearchDemonstrator, SearchSettings
from oakemu_rl.trajectories.trajectory_file import Trajectory, TrajectoryFileError
from trajectory_testing import random_policy, record

SCREEN = ObservationConfig(type="screen", height=32, width=32, frame_stack=4)


def play_random(
    game_key: str, seed: int, config: ObservationConfig = SCREEN, max_steps: int = 400
) -> tuple[Trajectory, list[np.ndarray[Any, Any]]]:
    """A seeded random episode of a bundled game, as a trajectory and its observations."""
    game = load_game(game_key)
    choose = random_policy(game.num_actions)
    return record(game, config, choose, seed=seed, max_steps=max_steps, source="run")


# -- files ---------------------------------------------------------------------------------


def test_trajectory_file_round_trip_with_a_state_start(tmp_path: Path) -> None:
    env = OakEmuEnv(load_game("catch"), SCREEN, seed=1)
    env.reset()
    state = env.save_state()
    trajectory = Trajectory(
        "Catch", "catch", "ab" * 32, np.array([0, 1, 2]), np.array([0.0, 1.0, -1.0]),
        start_state=state, start_step=40, outcome="loss", episode_return=0.0, lives_lost=1,
    )  # fmt: skip
    path = trajectory.save(tmp_path / "x.trajectory.json")
    loaded = Trajectory.load(path)
    assert loaded.start_state == state and loaded.start_step == 40
    assert loaded.actions.tolist() == [0, 1, 2] and loaded.rewards.tolist() == [0.0, 1.0, -1.0]
    assert (loaded.outcome, loaded.lives_lost, loaded.start_label) == ("loss", 1, "state@40")
    data = json.loads(path.read_text())
    assert (data["format"], data["version"]) == ("oakemu-rl-trajectory", 1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 2}, "version 2 is not supported"),
        ({"format": "other"}, "format is 'other'"),
        ({"actions": [0, -1, 2]}, "actions must be non-negative integers"),
        ({"rewards": [0, 1]}, "one reward per action"),
        ({"start": {}}, "start needs an integer 'seed' or a 'state'"),
        ({"outcome": "draw"}, "outcome 'draw'"),
    ],
)
def test_a_broken_trajectory_file_is_refused_with_the_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    trajectory, _ = play_random("catch", 0, max_steps=3)
    data = trajectory.to_dict() | change
    path = tmp_path / "bad.trajectory.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TrajectoryFileError, match=message) as info:
        Trajectory.load(path)
    assert str(path) in str(info.value)


def test_a_trajectory_of_another_game_yaml_is_refused(tmp_path: Path) -> None:
    trajectory, _ = play_random("catch", 0, max_steps=5)
    trajectory.save(tmp_path / "a.trajectory.json")
    with pytest.raises(TrajectoryFileError, match="not with this game"):
        DemonstrationSet.load([tmp_path], load_game("forest_run"), SCREEN)


# -- materialisation -------------------------------------------------------------------------


def test_materialised_observations_are_bit_identical_to_the_recording() -> None:
    trajectory, observations = play_random("forest_run", 3)
    env = OakEmuEnv(load_game("forest_run"), SCREEN)
    rebuilt = materialise(env, trajectory)
    assert len(rebuilt) == trajectory.length + 1
    for step, observation in rebuilt.items():
        assert np.array_equal(observation, observations[step]), f"step {step}"


def test_observations_rebuilt_from_saved_states_are_bit_identical(tmp_path: Path) -> None:
    trajectory, observations = play_random("forest_run", 4)
    trajectory.save(tmp_path / "a.trajectory.json")
    demos = DemonstrationSet.load([tmp_path], load_game("forest_run"), SCREEN, stride=7)
    demos.prepare()
    assert demos.states(0).steps[:3] == [0, 7, 14]
    steps = [trajectory.length - 1, 0, 3, 8, 21, 22, 23, 50]
    for step, observation in demos.observations(0, steps).items():
        assert np.array_equal(observation, observations[step]), f"step {step}"


def test_replay_reports_where_a_tampered_trajectory_diverges() -> None:
    trajectory, _ = play_random("catch", 2)
    trajectory.rewards[5] += 3.0
    env = OakEmuEnv(load_game("catch"), SCREEN)
    with pytest.raises(TrajectoryFileError, match="diverged at step 5"):
        list(replay(env, trajectory))


# -- restart pool -------------------------------------------------------------------------------


def test_restart_pool_failure_priority_draws_failing_states_most() -> None:
    pool = RestartPool(8, priority="failure")
    for i in range(2):
        pool.add(bytes([i]) * 10, episode_return=0.0, episode_step=i)
    easy, hard = pool.entries
    for _ in range(20):
        pool.report(easy.id, failed=False)
        pool.report(hard.id, failed=True)
    rng = np.random.default_rng(0)
    draws = [pool.sample(rng) for _ in range(2000)]
    hard_share = np.mean([d is not None and d.id == hard.id for d in draws])
    assert 0.9 < hard_share < 0.98  # (21/22) / (21/22 + 1/22)


@pytest.mark.parametrize("priority", ["return", "progress"])
def test_restart_pool_ranks_by_return_or_progress(priority: str) -> None:
    pool = RestartPool(8, priority=priority)  # type: ignore[arg-type]
    for i in range(4):
        pool.add(bytes([i]) * 10, episode_return=float(i), episode_step=i, progress=float(i))
    rng = np.random.default_rng(0)
    counts = np.bincount([pool.sample(rng).episode_step for _ in range(4000)], minlength=4)  # type: ignore[union-attr]
    assert np.all(np.diff(counts) > 0)  # by rank: 1:2:3:4
    assert counts[3] / counts[0] == pytest.approx(4, rel=0.25)


def test_restart_pool_is_bounded_in_bytes_and_keeps_demonstration_states() -> None:
    pool = RestartPool(100, priority="uniform", max_bytes=1000)
    pool.add(b"d" * 300, episode_return=0, episode_step=0, source="demo")
    for i in range(10):
        pool.add(bytes([i]) * 300, episode_return=0, episode_step=i)
    assert pool.nbytes <= 1000 and len(pool) == 3
    sources = [e.source for e in pool.entries]
    assert sources.count("demo") == 1
    assert [e.episode_step for e in pool.entries if e.source == "live"] == [8, 9]
    assert not pool.add(b"x" * 2000, episode_return=0, episode_step=0)


def test_restart_pool_round_trips_through_its_state_dict() -> None:
    pool = RestartPool(4, priority="failure")
    for i in range(6):
        pool.add(bytes([i]) * 1000, episode_return=float(i), episode_step=i, progress=i / 2)
    pool.report(pool.entries[0].id, failed=True)
    data = json.loads(json.dumps(pool.state_dict()))
    copy = RestartPool(4, priority="failure")
    copy.load_state_dict(data)
    assert copy.entries == pool.entries
    copy.add(b"z", episode_return=0, episode_step=0)
    assert max(e.id for e in copy.entries) > max(e.id for e in pool.entries)


# -- backplay --------------------------------------------------------------------------------------


def test_backplay_moves_the_hand_over_earlier_as_the_agent_succeeds(tmp_path: Path) -> None:
    trajectory, _ = play_random("catch", 5, max_steps=120)
    trajectory.save(tmp_path / "a.trajectory.json")
    demos = DemonstrationSet.load([tmp_path], load_game("catch"), SCREEN, stride=25)
    backplay = Backplay(demos, threshold=0.5, window=4)
    steps = demos.states(0).steps
    assert backplay.point(0) == steps[-1]
    rng = np.random.default_rng(0)
    hand_over = backplay.sample(rng)
    assert hand_over.step == steps[-1]
    assert hand_over.target_return == pytest.approx(trajectory.rewards[steps[-1] :].sum())
    # The demo did not win: success is collecting its return from the point on.
    for _ in range(4):
        assert not backplay.report(hand_over, won=False, episode_return=-100.0)
    assert backplay.point(0) == steps[-1]
    moved = [
        backplay.report(hand_over, won=False, episode_return=hand_over.target_return)
        for _ in range(4)
    ]
    # The second success makes 2 of the last 4 (0.5); later reports are of the old point.
    assert moved == [False, True, False, False]
    assert backplay.point(0) == steps[-2]
    # An episode that began at the old point no longer counts.
    assert not backplay.report(hand_over, won=True, episode_return=1e9)
    env = OakEmuEnv(load_game("catch"), SCREEN)
    env.reset(state=backplay.sample(rng).state)
    assert env.session.values == demos.states(0).values[-2]
    copy = Backplay(demos, threshold=0.5, window=4)
    copy.load_state_dict(json.loads(json.dumps(backplay.state_dict())))
    assert copy.point(0) == steps[-2] and copy.moves == 1


# -- search ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [11, 13])
def test_search_demonstrator_wins_catch(seed: int) -> None:
    game = load_game("catch")
    result = SearchDemonstrator(game, SearchSettings(beam=4, hold=4), seed=0).play(seed)
    trajectory = result.trajectory
    assert trajectory.won and trajectory.lives_lost == 0
    assert trajectory.start_seed == seed and trajectory.source == "demo"
    # The trajectory replays in a real env to the same rewards and the win.
    env = OakEmuEnv(game, ObservationConfig(type="attributes", frame_stack=1))
    last = list(replay(env, trajectory))[-1]
    assert last.terminated and last.info["outcome"] == "win"
