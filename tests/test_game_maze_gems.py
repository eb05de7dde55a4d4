"""Maze Gems, the bundled maze game: gems score, chasers cost lives, cleared mazes
advance, three cleared mazes win, and a scripted policy beats a random one."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from oakemu_rl.envs import OakEmuEnv

SMALL = {"height": 42, "width": 42, "frame_stack": 2}
NONE, UP, DOWN, LEFT, RIGHT = range(5)
STEPS = ((UP, 0, -1), (DOWN, 0, 1), (LEFT, -1, 0), (RIGHT, 1, 0))
ATTRS = 0x5800
GEM_ATTR = 0x45  # bright cyan ink on black
PLAYER_START = (15, 22)

Cell = tuple[int, int]


def chasers(values: dict[str, Any]) -> list[Cell]:
    return [(values["chaser1_x"], values["chaser1_y"]), (values["chaser2_x"], values["chaser2_y"])]


def first_step(env: OakEmuEnv, goal: Callable[[Cell, int], bool], avoid: set[Cell]) -> int | None:
    """The first move of a shortest path (breadth first, through the screen's
    attributes: walls are blue PAPER cells) from the player to a cell that
    satisfies `goal`, not passing through `avoid`; None when there is none."""
    attrs = env.machine.read(ATTRS, 768)
    values = env.session.values
    start = (values["player_x"], values["player_y"])
    first: dict[Cell, int] = {start: NONE}
    queue = deque([start])
    while queue:
        x, y = cell = queue.popleft()
        if cell != start and goal(cell, attrs[y * 32 + x]):
            return first[cell]
        for action, dx, dy in STEPS:
            nxt = (x + dx, y + dy)
            if nxt in first or nxt in avoid or attrs[nxt[1] * 32 + nxt[0]] & 0x38 == 0x08:
                continue
            first[nxt] = action if cell == start else first[cell]
            queue.append(nxt)
    return None


def greedy(env: OakEmuEnv) -> int:
    """Toward the nearest gem, keeping a cell away from the chasers when it can."""
    near = set()
    for cx, cy in chasers(env.session.values):
        near |= {(cx, cy)} | {(cx + dx, cy + dy) for _, dx, dy in STEPS}
    for avoid in (near, set(chasers(env.session.values))):
        action = first_step(env, lambda _, attr: attr == GEM_ATTR, avoid)
        if action is not None:
            return action
    return NONE


def play(env: OakEmuEnv, policy: Callable[[], int], until: Callable[[dict], bool], limit: int):
    """Step with `policy` until `until(info)` or the episode ends; returns the
    last step's reward and info and the rewards and events of all steps."""
    rewards: list[float] = []
    events: list[str] = []
    for _ in range(limit):
        _, reward, terminated, truncated, info = env.step(policy())
        rewards.append(reward)
        events += info["events"]
        if until(info) or terminated or truncated:
            return reward, info, rewards, events
    raise AssertionError(f"nothing happened in {limit} steps")


def test_a_gem_scores_ten_and_fires_its_event() -> None:
    env = OakEmuEnv("maze_gems", SMALL, seed=1)
    _, info = env.reset()
    values = info["values"]
    assert (values["player_x"], values["player_y"]) == PLAYER_START
    assert values["level"] == 1 and values["gems_left"] == 12 and info["lives"] == 3
    reward, info, rewards, _ = play(
        env, lambda: greedy(env), lambda i: "gem_collected" in i["events"], 200
    )
    assert info["score"] == 10 and reward == pytest.approx(1.0)
    assert info["values"]["gems_left"] == 11 and info["values"]["gems_collected"] == 1
    assert all(r == 0.0 for r in rewards[:-1])


def test_touching_a_chaser_costs_a_life_and_restarts_the_maze() -> None:
    env = OakEmuEnv("maze_gems", SMALL, seed=2)
    env.reset()

    def toward_chaser() -> int:
        targets = set(chasers(env.session.values))
        return first_step(env, lambda cell, _: cell in targets, set()) or NONE

    reward, info, _, _ = play(env, toward_chaser, lambda i: "life_lost" in i["events"], 300)
    assert info["lives"] == 2 and info["values"]["lives_lost"] == 1
    assert reward == pytest.approx(-5.0)
    assert info["outcome"] is None
    gems_left = info["values"]["gems_left"]
    # After the pause everyone is back at the start; the gems stay where they were.
    for _ in range(10):
        _, _, _, _, info = env.step(NONE)
    values = info["values"]
    assert (values["player_x"], values["player_y"]) == PLAYER_START
    assert values["gems_left"] == gems_left and info["lives"] == 2


def test_clearing_a_maze_advances_and_three_win() -> None:
    env = OakEmuEnv("maze_gems", SMALL, seed=3)
    env.reset()
    reward, info, _, events = play(
        env, lambda: greedy(env), lambda i: "level_cleared" in i["events"], 1000
    )
    assert "gem_collected" in info["events"]
    assert info["score"] == 12 * 10 + 100 and reward == pytest.approx(1.0 + 10.0)
    assert info["values"]["level"] == 2 and events.count("gem_collected") == 12
    for _ in range(10):  # the pause, then the next maze with more gems
        _, _, _, _, info = env.step(NONE)
    values = info["values"]
    assert values["gems_left"] == 16
    assert (values["player_x"], values["player_y"]) == PLAYER_START

    reward, info, _, events = play(env, lambda: greedy(env), lambda i: False, 2000)
    assert info["outcome"] == "win" and "won" in info["events"]
    assert info["values"]["level"] == 4 and info["values"]["gems_left"] == 0
    assert info["score"] == (12 + 16 + 20) * 10 + 3 * 100
    assert events.count("level_cleared") == 2 and events.count("gem_collected") == 36
    assert info["episode_return"] == pytest.approx(78.0 - 5.0 * info["values"]["lives_lost"])


def test_losing_every_life_ends_the_game() -> None:
    env = OakEmuEnv("maze_gems", SMALL, seed=4)
    env.reset()
    rng = random.Random(4)
    _, info, rewards, events = play(env, lambda: rng.randrange(5), lambda i: False, 3000)
    assert info["outcome"] == "loss" and "game_over" in info["events"]
    assert info["lives"] == 0 and info["values"]["lives_lost"] == 3
    assert events.count("life_lost") == 3
    assert sum(r < -4.0 for r in rewards) == 3


def test_scripted_policy_scores_far_more_than_random() -> None:
    def mean_score(policy: str, seeds: range) -> float:
        scores = []
        for seed in seeds:
            env = OakEmuEnv("maze_gems", SMALL, seed=seed)
            env.reset()
            rng = random.Random(seed)
            act = (
                (lambda r=rng: r.randrange(5)) if policy == "random" else (lambda e=env: greedy(e))
            )
            _, info, _, _ = play(env, act, lambda i: False, 3000)
            assert info["outcome"] in ("win", "loss")
            scores.append(info["score"])
        return sum(scores) / len(scores)

    random_mean = mean_score("random", range(5))
    scripted_mean = mean_score("scripted", range(3))
    assert random_mean > 0
    assert scripted_mean >= 3 * random_mean and scripted_mean >= 300
