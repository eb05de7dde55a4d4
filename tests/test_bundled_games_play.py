"""Rewards and episode outcomes of the bundled games, through OakEmuEnv and Gymnasium."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import oakemu_rl.envs  # noqa: F401  (registers oakemu/<game>)
from oakemu_rl.envs import OakEmuEnv
from oakemu_rl.games.loader import bundled_games

SMALL = {"height": 42, "width": 42, "frame_stack": 2}


def test_catch_rewards_each_catch_and_wins_at_30() -> None:
    env = OakEmuEnv("catch", SMALL, seed=11)
    _, info = env.reset()
    total, catches = 0.0, 0
    terminated = truncated = False
    while not (terminated or truncated):
        values = info["values"]
        ball, paddle = values["ball_x"], values["paddle_x"]
        action = 1 if ball < paddle + 1 else 2 if ball > paddle + 3 else 0
        _, reward, terminated, truncated, info = env.step(action)
        catches += "catch" in info["events"]
        assert reward == ("catch" in info["events"]) - ("miss" in info["events"])
        total += reward
    assert info["outcome"] == "win" and terminated and not truncated
    assert info["score"] == catches == 30 and total == 30.0


def test_catch_misses_cost_a_life_each_and_lose() -> None:
    env = OakEmuEnv("catch", SMALL, seed=12)
    env.reset()
    rewards, misses = [], 0
    done = False
    while not done:
        _, reward, terminated, truncated, info = env.step(0)  # never move
        done = terminated or truncated
        misses += "miss" in info["events"]
        rewards.append(reward)
    assert info["outcome"] == "loss" and info["lives"] == 0
    assert misses == 5 and rewards.count(-1.0) == 5


def test_forest_run_crash_costs_ten_and_the_last_sector_wins() -> None:
    env = OakEmuEnv("forest_run", SMALL, seed=13)
    env.reset()
    crash_rewards = []
    for _ in range(600):
        _, reward, terminated, _, info = env.step(0)
        if "crash" in info["events"]:
            crash_rewards.append(reward)
        if terminated:
            break
    assert crash_rewards and all(r <= -10.0 + 0.1 * 2 for r in crash_rewards)

    # Jump to the end of the last sector: finishing it is a win worth the sector bonus.
    env.reset(seed=14)
    machine = env.machine
    machine.write(0x8009, bytes([8]))  # sector 8
    machine.write(0x800A, (1).to_bytes(2, "little"))  # one row left
    machine.write(0x8008, b"9")  # lives enough to survive the approach
    outcome, events, rewards = None, [], []
    for _ in range(50):
        _, reward, terminated, truncated, info = env.step(0)
        events += info["events"]
        rewards.append(reward)
        if terminated or truncated:
            outcome = info["outcome"]
            break
    assert outcome == "win" and "won" in events and info["values"]["sector"] >= 9
    assert max(rewards) >= 100 * 0.1


@pytest.mark.parametrize("game", sorted(bundled_games()))
def test_bundled_games_pass_gymnasium_check_env(game: str) -> None:
    env = gym.make(f"oakemu/{game}", observation_config=SMALL)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, 42, 42) and obs.dtype == np.uint8
    env.close()


def test_bundled_game_via_module_prefixed_id() -> None:
    env = gym.make("oakemu_rl.envs:oakemu/catch")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84)
    env.close()


@pytest.mark.parametrize("game", sorted(bundled_games()))
def test_bundled_games_are_deterministic(game: str) -> None:
    """The same seed and actions give the same observations, rewards and outcomes."""

    def play(seed: int) -> list[tuple[bytes, float, bool, bool]]:
        env = OakEmuEnv(game, SMALL, seed=seed)
        obs, _ = env.reset(seed=seed)
        actions = np.random.default_rng(seed).integers(0, env.action_space.n, size=300)
        trace = [(obs.tobytes(), 0.0, False, False)]
        for action in actions:
            obs, reward, terminated, truncated, _ = env.step(int(action))
            trace.append((obs.tobytes(), reward, terminated, truncated))
            if terminated or truncated:
                obs, _ = env.reset()
        env.close()
        return trace

    first = play(3)
    assert first == play(3)
    assert first != play(4), f"{game}: two seeds played the same game"
