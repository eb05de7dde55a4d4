"""Deep Dive, the bundled diving game: a pearl lies deep and far, the air runs out under
water and fills up only at the surface, a jellyfish or the want of air costs a life,
twenty pearls win, and a scripted policy (greedy, with an eye on the air gauge and the
jellyfish) beats random play by far."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from oakemu_rl.envs import OakEmuEnv
from oakemu_rl.games import GameSession, load_game

SMALL = {"height": 42, "width": 42, "frame_stack": 2}
# Action indices (deep_dive.yaml) by move (dx, dy).
MOVES = {
    (0, 0): 0,
    (0, -1): 1,
    (0, 1): 2,
    (-1, 0): 3,
    (1, 0): 4,
    (-1, -1): 5,
    (1, -1): 6,
    (-1, 1): 7,
    (1, 1): 8,
}
NONE, UP, DOWN = 0, 1, 2
SURFACE, BOTTOM = 2, 22
START = (15, SURFACE)
AIR_MAX, AIR_LOW = 112, 28
AIR = 0x8007  # deep_dive.asm's air
ATTRS = 0x5800
COL_AIR, COL_AIR_LOW = 0x68, 0x50

Cell = tuple[int, int]


def jellies(values: dict[str, Any]) -> list[Cell]:
    return [(values[f"jelly{n}_x"], values[f"jelly{n}_y"]) for n in (1, 2, 3)]


def toward(values: dict[str, Any], target: Cell, avoid: list[Cell]) -> int:
    """The move that brings the diver nearest `target` (in moves), keeping clear of
    the cells in `avoid` and their neighbours (two columns either side) when it can."""
    x, y = values["diver_x"], values["diver_y"]
    best: tuple[tuple[int, int, int], int] | None = None
    for (dx, dy), action in MOVES.items():
        nx, ny = min(31, max(0, x + dx)), min(BOTTOM, max(SURFACE, y + dy))
        if target[1] == SURFACE == y and ny != SURFACE:
            continue  # breathing: stay at the surface
        distance = max(abs(nx - target[0]), abs(ny - target[1]))
        danger = sum(abs(nx - ax) <= 2 and abs(ny - ay) <= 1 for ax, ay in avoid)
        key = (danger, distance, abs(dx) + abs(dy))
        if best is None or key < best[0]:
            best = (key, action)
    assert best is not None
    return best[1]


def scripted(values: dict[str, Any]) -> int:
    """Down to the pearl; up (and along toward the pearl) when the air would not last
    much longer than the way up, and at the surface until the air is full again."""
    y, air = values["diver_y"], values["air"]
    pearl = (values["pearl_x"], values["pearl_y"])
    short_of_air = air <= (y - SURFACE) + 10 or (y == SURFACE and air < AIR_MAX)
    target = (pearl[0], SURFACE) if short_of_air else pearl
    return toward(values, target, jellies(values))


Played = tuple[float, dict[str, Any], list[float], list[str]]


def play(
    env: OakEmuEnv, policy: Callable[[], int], until: Callable[[dict[str, Any]], bool], limit: int
) -> Played:
    """Step with `policy` until `until(info)` or the episode ends; returns the last
    step's reward and info and the rewards and events of all steps."""
    rewards: list[float] = []
    events: list[str] = []
    for _ in range(limit):
        _, reward, terminated, truncated, info = env.step(policy())
        rewards.append(reward)
        events += info["events"]
        if until(info) or terminated or truncated:
            return reward, info, rewards, events
    raise AssertionError(f"nothing happened in {limit} steps")


def gauge(env: OakEmuEnv) -> list[int]:
    """The attributes of the air gauge's 28 cells (screen row 1, columns 4-31)."""
    return list(env.machine.read(ATTRS + 32 + 4, 28))


def test_the_pearl_lies_deep_and_far_from_the_diver() -> None:
    session = GameSession(load_game("deep_dive"))
    pearls = set()
    for seed in range(8):
        session.reset(seed=seed)
        values = session.values
        assert (values["diver_x"], values["diver_y"]) == START
        assert values["air"] == AIR_MAX and values["lives"] == 3 and values["score"] == 0
        pearl = (values["pearl_x"], values["pearl_y"])
        assert 12 <= pearl[1] <= BOTTOM and 0 <= pearl[0] <= 31
        assert abs(pearl[0] - START[0]) + abs(pearl[1] - START[1]) >= 14
        assert all(4 <= y <= BOTTOM for _, y in jellies(values))
        pearls.add(pearl)
    assert len(pearls) >= 6  # the seed places it


def test_a_pearl_scores_ten_and_the_next_lies_far_away() -> None:
    env = OakEmuEnv("deep_dive", SMALL, seed=1)
    env.reset()
    reward, info, rewards, _ = play(
        env, lambda: scripted(env.session.values), lambda i: "pearl_collected" in i["events"], 200
    )
    assert info["score"] == 10 and reward == pytest.approx(1.0)
    assert all(r == 0.0 for r in rewards[:-1])
    values = info["values"]
    assert values["pearls"] == 1
    distance = abs(values["pearl_x"] - values["diver_x"]) + abs(
        values["pearl_y"] - values["diver_y"]
    )
    assert distance >= 14 and values["pearl_y"] >= 12


def test_air_runs_down_under_water_and_fills_up_at_the_surface() -> None:
    env = OakEmuEnv("deep_dive", SMALL, seed=2)
    env.reset()
    assert gauge(env) == [COL_AIR] * 28
    while env.session.values["diver_y"] < SURFACE + 2:
        env.step(DOWN)
    air = env.session.values["air"]
    for _ in range(3):  # one unit a step under water
        _, _, _, _, info = env.step(NONE)
        assert "life_lost" not in info["events"]
        assert info["values"]["air"] == air - 1
        air -= 1
    lit = (air + 3) // 4
    assert gauge(env) == [COL_AIR] * lit + [0] * (28 - lit)
    env.machine.write(AIR, bytes([10]))  # low: the gauge turns red
    _, _, _, _, info = env.step(UP)
    assert info["values"]["air"] == 9 and info["values"]["diver_y"] == SURFACE + 1
    assert gauge(env) == [COL_AIR_LOW] * 3 + [0] * 25
    _, _, _, _, info = env.step(UP)  # at the surface: 2 units a frame
    assert info["values"]["diver_y"] == SURFACE and info["values"]["air"] > 9
    for _ in range(14):
        _, _, _, _, info = env.step(NONE)
    assert info["values"]["air"] == AIR_MAX and gauge(env) == [COL_AIR] * 28


def test_running_out_of_air_costs_a_life_and_a_fresh_start() -> None:
    env = OakEmuEnv("deep_dive", SMALL, seed=3)
    env.reset()
    while env.session.values["diver_y"] == SURFACE:  # to row 3, above the jellyfish's rows
        env.step(DOWN)
    env.machine.write(AIR, bytes([5]))
    reward, info, _, _ = play(env, lambda: NONE, lambda i: "life_lost" in i["events"], 20)
    assert "out_of_air" in info["events"] and "stung" not in info["events"]
    assert info["lives"] == 2 and info["values"]["air_outs"] == 1
    assert reward == pytest.approx(-1.0) and info["outcome"] is None
    for _ in range(8):  # the pause, then back at the surface with full air
        _, _, _, _, info = env.step(NONE)
    values = info["values"]
    assert (values["diver_x"], values["diver_y"]) == START and values["air"] == AIR_MAX


def test_a_jellyfish_sting_costs_a_life_and_three_lose() -> None:
    env = OakEmuEnv("deep_dive", SMALL, seed=4)
    env.reset()

    def toward_jelly() -> int:
        values = env.session.values
        return toward(values, jellies(values)[0], [])

    reward, info, _, _ = play(env, toward_jelly, lambda i: "stung" in i["events"], 200)
    assert "life_lost" in info["events"] and info["values"]["stings"] == 1
    assert info["lives"] == 2 and reward == pytest.approx(-1.0)
    _, info, _, events = play(env, toward_jelly, lambda i: False, 600)
    assert info["outcome"] == "loss" and "game_over" in info["events"]
    assert events.count("life_lost") == 2 and info["values"]["lives_lost"] == 3


def test_twenty_pearls_win() -> None:
    env = OakEmuEnv("deep_dive", SMALL, seed=5)
    env.reset()
    _, info, _, events = play(env, lambda: scripted(env.session.values), lambda i: False, 3000)
    assert info["outcome"] == "win" and "won" in info["events"]
    assert info["score"] == 200 and events.count("pearl_collected") == 20
    assert info["episode_return"] == pytest.approx(20.0 - info["values"]["lives_lost"])


def test_scripted_policy_scores_far_more_than_random() -> None:
    session = GameSession(load_game("deep_dive"))

    def score(policy: Callable[[], int], seed: int) -> int:
        session.reset(seed=seed)
        for _ in range(3000):
            step = session.step(policy())
            if step.outcome:
                return int(session.values["score"])
        raise AssertionError("the episode did not end")

    rng = random.Random(0)
    random_scores = [score(lambda: rng.randrange(9), seed) for seed in range(5)]
    scripted_scores = [score(lambda: scripted(session.values), seed) for seed in (10, 11)]
    assert sum(random_scores) / 5 <= 10  # sparse: random play seldom reaches a pearl
    assert min(scripted_scores) >= 150
