"""Key Hunt, the bundled key-and-door game: the key lies far from the start and opens
the door, a guard or the clock costs a life, three rooms left win, and a scripted
policy (breadth first through the game's own room map) beats random play by far."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from oakemu_rl.envs import OakEmuEnv
from oakemu_rl.games import GameSession, load_game

SMALL = {"height": 42, "width": 42, "frame_stack": 2}
NONE, UP, DOWN, LEFT, RIGHT = range(5)
STEPS = ((UP, 0, -1), (DOWN, 0, 1), (LEFT, -1, 0), (RIGHT, 1, 0))
ROOM_MAP = 0xC000  # key_hunt.asm's room_map: one byte a cell, 32 a row
T_EMPTY, T_WALL, T_KEY, T_DOOR = range(4)
ATTRS = 0x5800
COL_LOCKED, COL_OPEN = 0x56, 0x64
START = (1, 22)  # the player's start cell in every room
KEY_DISTANCE = 16

Cell = tuple[int, int]


def guards(values: dict[str, Any]) -> list[Cell]:
    return [(values["guard1_x"], values["guard1_y"]), (values["guard2_x"], values["guard2_y"])]


def first_step(session: GameSession, goal: Cell, avoid: set[Cell]) -> int | None:
    """The first move of a shortest path from the player to `goal` through the room
    map, not passing through `avoid` (nor the door, unless it is the goal)."""
    room = session.machine.read(ROOM_MAP, 768)
    values = session.values
    start = (values["player_x"], values["player_y"])
    first: dict[Cell, int] = {start: NONE}
    queue = deque([start])
    while queue:
        x, y = cell = queue.popleft()
        if cell == goal:
            return first[cell]
        for action, dx, dy in STEPS:
            nxt = (x + dx, y + dy)
            tile = room[nxt[1] * 32 + nxt[0]]
            if nxt in first or nxt in avoid or tile == T_WALL or (tile == T_DOOR and nxt != goal):
                continue
            first[nxt] = action if cell == start else first[cell]
            queue.append(nxt)
    return None


def scripted(session: GameSession) -> int:
    """To the key, then to the door, a cell away from the guards when it can."""
    values = session.values
    if values["has_key"]:
        goal = (values["door_x"], values["door_y"])
    else:
        goal = (values["key_x"], values["key_y"])
    near = set()
    for gx, gy in guards(values):
        near |= {(gx, gy)} | {(gx + dx, gy + dy) for _, dx, dy in STEPS}
    for avoid in (near, set(guards(values))):
        action = first_step(session, goal, avoid)
        if action is not None:
            return action
    return NONE


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


def test_the_key_lies_far_from_the_start_on_an_open_cell() -> None:
    session = GameSession(load_game("key_hunt"))
    keys = set()
    for seed in range(8):
        session.reset(seed=seed)
        values = session.values
        assert (values["player_x"], values["player_y"]) == START
        assert values["level"] == 1 and values["has_key"] == 0 and values["lives"] == 3
        assert values["time_left"] == 60 and values["score"] == 0
        key = (values["key_x"], values["key_y"])
        assert abs(key[0] - START[0]) + abs(key[1] - START[1]) >= KEY_DISTANCE
        room = session.machine.read(ROOM_MAP, 768)
        assert room[key[1] * 32 + key[0]] == T_KEY
        assert room[values["door_y"] * 32 + values["door_x"]] == T_DOOR
        assert first_step(session, key, set()) is not None  # reachable
        keys.add(key)
    assert len(keys) >= 6  # the seed places it


def test_the_key_scores_ten_and_opens_the_door() -> None:
    env = OakEmuEnv("key_hunt", SMALL, seed=1)
    _, info = env.reset()
    door = (info["values"]["door_x"], info["values"]["door_y"])
    attrs = env.machine.read(ATTRS, 768)
    assert attrs[door[1] * 32 + door[0]] == COL_LOCKED
    reward, info, rewards, _ = play(
        env, lambda: scripted(env.session), lambda i: "key_found" in i["events"], 200
    )
    assert info["score"] == 10 and reward == pytest.approx(1.0)
    assert info["values"]["has_key"] == 1 and info["values"]["keys_found"] == 1
    assert all(r == 0.0 for r in rewards[:-1])
    attrs = env.machine.read(ATTRS, 768)
    assert attrs[door[1] * 32 + door[0]] == COL_OPEN


def test_the_door_stays_shut_without_the_key() -> None:
    session = GameSession(load_game("key_hunt"))
    session.reset(seed=2)
    values = session.values
    door = (values["door_x"], values["door_y"])
    # The first room's door is in the top wall: stand below it and walk up.
    session.machine.write(0x8009, bytes([door[0], door[1] + 1]))  # player_x, player_y
    for _ in range(5):
        step = session.step(UP)
        assert "room_cleared" not in step.events
    values = session.values
    assert (values["player_x"], values["player_y"]) == (door[0], door[1] + 1)
    assert values["level"] == 1 and values["score"] == 0


def test_leaving_three_rooms_wins() -> None:
    env = OakEmuEnv("key_hunt", SMALL, seed=3)
    env.reset()
    reward, info, _, _ = play(
        env, lambda: scripted(env.session), lambda i: "room_cleared" in i["events"], 400
    )
    assert info["score"] == 60 and reward == pytest.approx(5.0)
    assert info["values"]["level"] == 2
    for _ in range(8):  # the pause, then the next room: key hidden again, a full clock
        _, _, _, _, info = env.step(NONE)
    values = info["values"]
    assert values["has_key"] == 0 and values["time_left"] == 60
    assert (values["player_x"], values["player_y"]) == START

    _, info, _, events = play(env, lambda: scripted(env.session), lambda i: False, 1500)
    assert info["outcome"] == "win" and "won" in info["events"]
    assert info["values"]["level"] == 4 and info["score"] == 3 * (10 + 50)
    assert events.count("room_cleared") == 2 and events.count("key_found") == 2
    assert info["episode_return"] == pytest.approx(18.0 - info["values"]["lives_lost"])


def test_a_guard_costs_a_life_and_sends_everyone_back() -> None:
    env = OakEmuEnv("key_hunt", SMALL, seed=4)
    env.reset()

    def toward_guard() -> int:
        return first_step(env.session, guards(env.session.values)[0], set()) or NONE

    reward, info, _, _ = play(env, toward_guard, lambda i: "life_lost" in i["events"], 300)
    assert "time_up" not in info["events"]
    assert info["lives"] == 2 and info["values"]["lives_lost"] == 1
    assert reward == pytest.approx(-1.0) and info["outcome"] is None
    for _ in range(8):  # the pause, then back at the start with a full clock
        _, _, _, _, info = env.step(NONE)
    values = info["values"]
    assert (values["player_x"], values["player_y"]) == START
    assert values["time_left"] >= 59 and info["lives"] == 2


def test_running_out_of_time_costs_a_life_and_three_lose() -> None:
    session = GameSession(load_game("key_hunt"))
    session.reset(seed=5)
    events: list[str] = []
    steps = 0
    while True:  # standing at the start, out of the guards' way
        step = session.step(NONE)
        steps += 1
        events += step.events
        if step.outcome:
            break
    assert step.outcome == "loss" and "game_over" in step.events
    assert events.count("time_up") == 3 and events.count("life_lost") == 3
    assert session.values["timeouts"] == 3 and session.values["lives"] == 0
    # 60 units of 16 frames, 4 frames a step: 240 steps a life, plus the pauses.
    assert 3 * 240 <= steps <= 3 * 240 + 30


def test_scripted_policy_scores_far_more_than_random() -> None:
    session = GameSession(load_game("key_hunt"))

    def score(policy: Callable[[], int], seed: int) -> int:
        session.reset(seed=seed)
        for _ in range(2000):
            step = session.step(policy())
            if step.outcome:
                return int(session.values["score"])
        raise AssertionError("the episode did not end")

    rng = random.Random(0)
    random_scores = [score(lambda: rng.randrange(5), seed) for seed in range(5)]
    scripted_scores = [score(lambda: scripted(session), seed) for seed in range(10, 13)]
    assert sum(random_scores) / 5 <= 10  # sparse: random play seldom finds a key
    assert min(scripted_scores) >= 120 and sum(scripted_scores) / 3 >= 150
