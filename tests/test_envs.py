"""OakEmuEnv observations, Gymnasium conformance and the Gymnasium backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from oakemu_rl.cli.main import main
from oakemu_rl.envs import GymBackendEnv, OakEmuEnv, make_env

WriteGame = Callable[..., Path]


@pytest.mark.parametrize(
    "config,shape",
    [
        ({}, (4, 84, 84)),
        ({"height": 48, "width": 64, "frame_stack": 2}, (2, 48, 64)),
        ({"grayscale": False, "height": 32, "width": 32, "frame_stack": 3}, (9, 32, 32)),
        ({"height": 192, "width": 256, "frame_stack": 1}, (1, 192, 256)),
        ({"type": "attributes", "frame_stack": 2}, (36, 24, 32)),
        ({"type": "attributes", "attribute_encoding": "colours", "frame_stack": 2}, (4, 24, 32)),
        ({"type": "attributes", "attribute_encoding": "byte", "frame_stack": 2}, (2, 24, 32)),
        (
            {"type": "ram", "ram": ["score", {"address": 0x9000, "length": 4}], "frame_stack": 3},
            (15,),
        ),
    ],
)
def test_observation_shapes_and_dtypes(
    write_game: WriteGame, config: dict[str, Any], shape: tuple[int, ...]
) -> None:
    env = OakEmuEnv(write_game(), config, seed=0)
    obs, _ = env.reset()
    assert obs.shape == shape == env.observation_space.shape
    assert obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    obs2, *_ = env.step(0)
    assert obs2.shape == shape and env.observation_space.contains(obs2)


def test_play_area_crop_and_attributes(write_game: WriteGame) -> None:
    area = {"x": 16, "y": 8, "width": 64, "height": 32}
    env = OakEmuEnv(write_game({"play_area": area}), {"type": "attributes", "frame_stack": 1})
    env.reset(seed=0)
    assert env.observation_space.shape == (18, 4, 8)  # 8 inks, 8 papers, bright, flash
    env.machine.write(0x5800 + 1 * 32 + 2, b"\x4f")  # cell row 1, column 2: the crop's corner
    obs, *_ = env.step(0)
    # White ink (plane 7), blue paper (8 + 1), bright (16).
    assert np.flatnonzero(obs[:, 0, 0]).tolist() == [7, 9, 16] and obs[:, 0, 0].max() == 255


def test_ram_observation_reads_named_variables(write_game: WriteGame) -> None:
    env = OakEmuEnv(write_game(), {"type": "ram", "ram": ["score"], "frame_stack": 1})
    env.reset(seed=0)
    obs, _, _, _, info = env.step(0)
    assert int(obs[0]) == info["score"]


def test_variable_planes_show_a_variable_bit_by_bit(write_game: WriteGame) -> None:
    config = {"type": "attributes", "variable_planes": ["score"], "frame_stack": 2}
    env = OakEmuEnv(write_game(), config)
    env.reset(seed=0)
    assert env.observation_space.shape == (2 * (18 + 8), 24, 32)
    scores = []
    for _ in range(5):
        obs, _, _, _, info = env.step(0)
        scores.append(info["score"])

    def shown(planes: np.ndarray) -> int:
        assert planes.min(axis=(1, 2)).tolist() == planes.max(axis=(1, 2)).tolist()
        assert set(planes.flatten().tolist()) <= {0, 255}
        return sum(int(plane[0, 0]) // 255 << i for i, plane in enumerate(planes))

    # Each frame's 8 planes after its 18 attribute planes: the older frame, then the newest.
    assert [shown(obs[18:26]), shown(obs[26 + 18 :])] == scores[-2:]
    assert scores[-2] != scores[-1]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"type": "attributes", "variable_planes": ["nonesuch"]}, "'nonesuch' is not a data"),
        (
            {"type": "attributes", "attribute_encoding": "byte", "variable_planes": ["score"]},
            "no plane axis",
        ),
        ({"type": "screen", "variable_planes": ["score"]}, "variable_planes applies to"),
    ],
)
def test_variable_planes_refused_where_they_cannot_apply(
    write_game: WriteGame, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        OakEmuEnv(write_game(), config)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "env: {observation: {type: ram, ram: [nosuch]}}",
            "env.observation: observation ram entry 'nosuch' is not a data variable of",
        ),
        (
            "env: {observation: {type: attributes, variable_planes: [nosuch]}}",
            "env.observation: observation variable_planes entry 'nosuch'",
        ),
        (
            "restart_pool: {enabled: true, priority: progress, progress_variable: nosuch}",
            "restart_pool.progress_variable: 'nosuch' is not a data variable of",
        ),
    ],
)
def test_train_refuses_a_setting_naming_no_variable_of_the_game(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, message: str
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(f"game: catch\n{setting}\n")
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config), "--run-dir", str(run_dir), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert message in error and "catch.yaml" in error and "defined: " in error
    assert "Traceback" not in error and not run_dir.exists()


def test_frame_stack_shifts_oldest_out(write_game: WriteGame) -> None:
    env = OakEmuEnv(write_game(), {"type": "ram", "ram": ["score"], "frame_stack": 3})
    obs, _ = env.reset(seed=0)
    assert len(set(obs.tolist())) == 1  # reset fills the stack with the first frame
    scores = [int(env.step(0)[0][-1]) for _ in range(3)]
    obs, *_ = env.step(0)
    assert obs[:2].tolist() == scores[1:]


def test_info_and_outcome(write_game: WriteGame) -> None:
    env = OakEmuEnv(write_game(), {"type": "ram", "ram": ["score"], "frame_stack": 1}, seed=0)
    env.reset()
    terminated = truncated = False
    steps = 0
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(1)
        steps += 1
    assert terminated and info["outcome"] == "win" and info["score"] >= 60
    assert set(info) >= {"score", "lives", "events", "outcome"}
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(0)
    with pytest.raises(ValueError, match=r"outside 0\.\.2"):
        env.reset()
        env.step(7)


def test_reset_from_saved_state_replays_identically(write_game: WriteGame) -> None:
    env = OakEmuEnv(write_game(), {"height": 32, "width": 32, "frame_stack": 2}, seed=5)
    env.reset()
    for _ in range(3):
        env.step(1)
    state = env.save_state()
    first = [env.step(a) for a in (0, 1, 2, 0)]
    env.reset(state=state)
    again = [env.step(a) for a in (0, 1, 2, 0)]
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a[0], b[0]) and a[1:4] == b[1:4]
    env.reset(options={"state": state})
    assert np.array_equal(env.step(0)[0], first[0][0])


def test_reset_reports_the_episode_seed_that_rebuilds_the_episode(write_game: WriteGame) -> None:
    env = OakEmuEnv(write_game(), {"type": "ram", "ram": ["seed"], "frame_stack": 1}, seed=2)
    obs, info = env.reset()
    steps = [env.step(a)[0].tolist() for a in (1, 2, 0, 1)]
    assert isinstance(info["episode_seed"], int)
    env.session.reset(info["episode_seed"])  # the same start, rebuilt from the recorded seed
    assert env.session.values["seed"] == int(obs[0]) | (int(obs[1]) << 8)
    assert [env.step(a)[0].tolist() for a in (1, 2, 0, 1)] == steps
    assert env.reset(state=env.save_state())[1]["episode_seed"] is None


def test_same_seed_same_episode(write_game: WriteGame) -> None:
    runs = []
    for _ in range(2):
        env = OakEmuEnv(write_game(), {"type": "ram", "ram": ["seed"], "frame_stack": 1}, seed=9)
        obs, _ = env.reset()
        runs.append(obs.tolist())
    assert runs[0] == runs[1]


def test_check_env_passes(write_game: WriteGame) -> None:
    check_env(OakEmuEnv(write_game(), {"height": 32, "width": 32}), skip_render_check=True)


def test_render_rgb_array(write_game: WriteGame) -> None:
    env = OakEmuEnv(write_game(), render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame is not None and frame.shape == (192, 256, 3) and frame.dtype == np.uint8


def test_gymnasium_make_with_any_yaml(write_game: WriteGame) -> None:
    env = gym.make("oakemu/game", game=str(write_game()), observation_config={"frame_stack": 1})
    obs, _ = env.reset(seed=0)
    assert obs.shape == (1, 84, 84)
    env.close()


def test_gym_backend_cartpole_through_make_env() -> None:
    env = make_env("gym:CartPole-v1", seed=3)
    assert isinstance(env, GymBackendEnv)
    obs, info = env.reset()
    assert obs.shape == (4,) and info["outcome"] is None
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, info = env.step(0)
        total += reward
        done = terminated or truncated
    assert info["outcome"] == "loss" and info["score"] == total == info["episode_return"]
    with pytest.raises(NotImplementedError, match="gym:CartPole-v1"):
        env.save_state()
    with pytest.raises(ValueError, match="gym:NoSuchEnv-v0"):
        make_env("gym:NoSuchEnv-v0")


def test_make_env_builds_oakemu_env_from_path(write_game: WriteGame) -> None:
    assert isinstance(make_env(str(write_game())), OakEmuEnv)
