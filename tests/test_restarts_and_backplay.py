"""Restart pools, backplay and trajectory files in real runs, for DQN and PPO alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oakemu_rl.envs.oakemu_env import OakEmuEnv
from oakemu_rl.envs.observation import ObservationConfig
from oakemu_rl.experiments import EXPERIMENTS, Experiment
from oakemu_rl.games.loader import load_game
from oakemu_rl.runtime.checkpoints import CheckpointManager
from oakemu_rl.runtime.config_base import ExperimentConfiguration
from oakemu_rl.trajectories.materialise import replay
from oakemu_rl.trajectories.trajectory_file import load_trajectories
from test_trajectories import play_random

ATTRIBUTES = {"type": "attributes", "frame_stack": 1}


def catch_run(algo: str, demos: Path, **overrides: Any) -> ExperimentConfiguration:
    data: dict[str, Any] = {
        "algo": algo,
        "game": "catch",
        "total_steps": 1200,
        "torch_threads": 1,
        "env": {"num_envs": 4, "backend": "inline", "observation": ATTRIBUTES},
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": 600, "keep_last": 5},
        "logging": {"console": False, "tensorboard": False, "log_every_steps": 100},
        "restart_pool": {
            "enabled": True,
            "save_every_steps": 20,
            "restart_probability": 0.5,
            "priority": "failure",
        },
        "demos": {"paths": [str(demos)], "backplay_probability": 0.3, "backplay_stride": 20},
    }
    if algo == "dqn":
        data["learner"] = {"learning_starts": 200, "batch_size": 16}
    else:
        data["ppo"] = {"rollout_steps": 64, "epochs": 1, "minibatches": 2}
        data["bc"] = {"batch_size": 16}
    data.update(overrides)
    return EXPERIMENTS[algo].config_type.from_dict(data)


def quiet(experiment_type: Any, *args: Any, **kwargs: Any) -> Experiment[Any]:
    return experiment_type(*args, console=False, print_fn=lambda _: None, **kwargs)


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_restarts_backplay_and_trajectory_files_survive_resume(algo: str, tmp_path: Path) -> None:
    demos = tmp_path / "demos"
    trajectory, _ = play_random("catch", 7, ObservationConfig(**ATTRIBUTES), max_steps=200)
    trajectory.save(demos / "random.trajectory.json")
    run_dir = tmp_path / "run"
    experiment = quiet(EXPERIMENTS[algo], catch_run(algo, demos), run_dir)
    experiment.run()
    metrics = experiment.memory.snapshot()
    assert metrics["restart_pool/restarted_fraction"] > 0.1
    assert metrics["backplay/episode_fraction"] > 0.05
    assert "restart_pool/start_step" in metrics
    pool = experiment.actor.restart_pool
    assert pool is not None
    sources = {e.source for e in pool.entries}
    assert sources == {"demo", "live"}
    assert any(e.restarts for e in pool.entries)
    saved_entries = pool.entries
    first_files = {p.name for p, _ in load_trajectories([run_dir / "trajectories"])}
    assert first_files

    # Every kept episode, from the game's start, a restart or a backplay state, replays
    # to its recorded rewards.
    starts = set()
    env = OakEmuEnv(load_game("catch"), ObservationConfig(**ATTRIBUTES))
    for path, kept in load_trajectories([run_dir / "trajectories"]):
        assert kept.source == "run" and kept.game_file == "catch"
        starts.add(kept.info["start_point"])
        assert len(list(replay(env, kept))) == kept.length, path
    assert starts <= {"initial", "restart", "backplay"} and len(starts) >= 2

    # Resume: the pool comes back from the checkpoint, the files stay and grow.
    checkpoint = CheckpointManager(run_dir / "checkpoints").latest()
    assert checkpoint is not None and checkpoint.has("restart_pool.json")
    resumed = EXPERIMENTS[algo].from_run_dir(
        run_dir, total_steps=1800, console=False, print_fn=lambda _: None
    )
    resumed.build()
    restored = resumed.actor.restart_pool
    assert restored is not None
    assert [(e.id, e.restarts, e.failures) for e in restored.entries] == [
        (e.id, e.restarts, e.failures) for e in saved_entries
    ]
    resumed.run()
    files = {p.name for p, _ in load_trajectories([run_dir / "trajectories"])}
    assert len(files) >= len(first_files)
    recorded = resumed.actor.trajectory_runtime.total_recorded
    assert recorded > experiment.actor.trajectory_runtime.total_recorded
