"""Sky Harvest, the bundled Kempston-only game: its BCD score, its joystick-only input,
its events (a fruit, a bird, the end of the day, game over) and that it is learnable
(a scripted policy scores far more than a random one)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from oakemu_rl.emulator.keyboard import KEYBOARD_KEYS
from oakemu_rl.emulator.machine import ZXSpectrum
from oakemu_rl.envs import OakEmuEnv
from oakemu_rl.games import GameSession, load_game

SMALL = {"height": 42, "width": 42, "frame_stack": 2}

# Addresses from sky_harvest.asm (the YAML names the same ones).
SCORE, LIVES, PLAYER_X, PLAYER_Y = 0x8002, 0x8005, 0x8006, 0x8007
FRUIT_X, FRUIT_Y, BONUS, BONUS_TIMER = 0x8008, 0x8009, 0x800B, 0x800C
TIME_LEFT, TIME_TIMER = 0x800D, 0x800E
BIRDS, BIRD_SIZE, NUM_BIRDS = 0x8020, 8, 6  # records: y, x, dir, period, timer, wait, wing

# Action indices (sky_harvest.yaml): none, up, down, left, right, then the diagonals.
NONE, UP, DOWN, LEFT, RIGHT = range(5)
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


@pytest.fixture(scope="module")
def session() -> GameSession:
    return GameSession(load_game("sky_harvest"))


def settle(step: Callable[[int], object]) -> None:
    """One step with no move: the start procedure ends mid-frame, so the first step
    after a reset holds one game update fewer than the others (3 instead of 4)."""
    step(NONE)


def ground_birds(machine: ZXSpectrum) -> None:
    """Land every bird and keep it resting for 255 frames (about 60 steps)."""
    for n in range(NUM_BIRDS):
        record = BIRDS + n * BIRD_SIZE
        machine.write(record, bytes([0]))  # not flying
        machine.write(record + 5, bytes([255]))  # wait


def place(machine: ZXSpectrum, address: int, x: int, y: int) -> None:
    machine.write(address, bytes([x, y]))


def test_score_is_six_bcd_digits(session: GameSession) -> None:
    session.reset(seed=1)
    assert session.values["score"] == 0 and session.values["lives"] == 3
    assert session.values["time_left"] == 99
    settle(session.step)
    session.machine.write(SCORE, bytes([0x01, 0x23, 0x45]))
    assert session.read_values()["score"] == 12345
    # A pick adds with DAA: 998 + 6 carries into the next BCD byte.
    machine = session.machine
    session.machine.write(SCORE, bytes([0x00, 0x09, 0x98]))
    ground_birds(machine)
    place(machine, PLAYER_X, 10, 10)
    place(machine, FRUIT_X, 12, 10)
    machine.write(BONUS, bytes([5, 30]))
    step = session.step(RIGHT)  # two cells a step
    assert "fruit_collected" in step.events
    assert machine.read(SCORE, 3) == bytes([0x00, 0x10, 0x04])
    assert step.values["score"] == 1004


def test_only_the_kempston_joystick_is_read(session: GameSession) -> None:
    # On the title screen SPACE (or any key) does not start a game; fire does.
    title = ZXSpectrum("48k")
    title.load_snapshot(session.game.snapshot)
    title.run_frames(5)
    main_loop = session.game.spec.routines["main_loop"]
    title.set_keys(list(KEYBOARD_KEYS))
    assert title.run_until(main_loop, 20) is None
    title.set_keys(["KEMPSTON_FIRE"])
    assert title.run_until(main_loop, 20) is not None

    machine = session.machine
    session.reset(seed=2)
    settle(session.step)
    ground_birds(machine)
    place(machine, PLAYER_X, 10, 10)
    place(machine, FRUIT_X, 30, 20)
    ports: list[int] = []
    machine.set_port_read_hook(lambda port, _value: ports.append(port))
    try:
        machine.set_keys(list(KEYBOARD_KEYS))  # every key of the keyboard held: nothing moves
        machine.run_frames(16)
        assert session.read_values()["player_x"] == 10
        assert session.read_values()["player_y"] == 10
    finally:
        machine.set_port_read_hook(None)
        machine.set_keys(())
    assert ports and all(port & 0xFF == 0x1F for port in ports)

    for action, (x, y) in [(RIGHT, (12, 10)), (DOWN, (12, 12)), (LEFT, (10, 12)), (UP, (10, 10))]:
        values = session.step(action).values
        assert (values["player_x"], values["player_y"]) == (x, y)
    values = session.step(MOVES[(1, 1)]).values  # a diagonal: both directions at once
    assert (values["player_x"], values["player_y"]) == (12, 12)
    values = session.step(NONE).values
    assert (values["player_x"], values["player_y"]) == (12, 12)


def test_a_fruit_scores_its_bonus_and_a_new_one_appears() -> None:
    env = OakEmuEnv("sky_harvest", SMALL, seed=3)
    env.reset()
    settle(env.step)
    machine = env.machine
    ground_birds(machine)
    place(machine, PLAYER_X, 5, 5)
    place(machine, FRUIT_X, 5, 3)
    machine.write(BONUS, bytes([5, 30]))
    _, reward, terminated, _, info = env.step(UP)
    assert "fruit_collected" in info["events"] and not terminated
    assert info["score"] == 6 and reward == 6.0  # 1 point and a quick-pick bonus of 5
    assert info["values"]["picks"] == 1
    assert (info["values"]["fruit_x"], info["values"]["fruit_y"]) != (5, 3)
    # A fruit left waiting loses its bonus: it is then worth 1.
    machine.write(BONUS, bytes([0, 30]))
    values = info["values"]
    place(machine, PLAYER_X, 20, 15)
    place(machine, FRUIT_X, 22, 15)
    _, reward, _, _, info = env.step(RIGHT)
    assert "fruit_collected" in info["events"]
    assert info["score"] == values["score"] + 1 and reward == 1.0
    env.close()


def test_a_bird_costs_a_life_and_the_last_one_ends_the_game() -> None:
    env = OakEmuEnv("sky_harvest", SMALL, seed=4)
    env.reset()
    settle(env.step)
    machine = env.machine
    for lives_before in (3, 2, 1):
        ground_birds(machine)
        place(machine, PLAYER_X, 16, 8)
        place(machine, FRUIT_X, 2, 20)
        # A fast bird just left of the balloon, flying right.
        machine.write(BIRDS, bytes([8, 15, 1, 1, 1, 0, 0]))
        rewards, events = [], []
        for _ in range(12):
            _, reward, terminated, truncated, info = env.step(NONE)
            rewards.append(reward)
            events += info["events"]
            if "life_lost" in info["events"]:
                break
        assert "life_lost" in events
        assert info["lives"] == lives_before - 1
        assert -5.0 in rewards
        if lives_before > 1:
            assert not terminated
            for _ in range(10):  # the crash is shown for 30 frames, then the sky clears
                _, _, terminated, _, info = env.step(NONE)
            assert not terminated and info["lives"] == lives_before - 1
            assert all(info["values"][f"bird{n}_y"] == 0 for n in range(NUM_BIRDS))
    assert terminated and not truncated
    assert info["outcome"] == "loss" and info["lives"] == 0
    assert "game_over" in machine.run_frames(40)  # after the crash is shown
    env.close()


def test_the_end_of_the_day_wins(session: GameSession) -> None:
    session.reset(seed=5)
    ground_birds(session.machine)
    session.machine.write(TIME_LEFT, bytes([0x01, 3]))  # 1 second left, 3 frames of it
    step = session.step(NONE)
    assert "time_up" in step.events and step.outcome == "win"
    assert step.values["time_left"] == 0 and step.values["lives"] == 3


def test_staying_put_is_not_safe(session: GameSession) -> None:
    """Birds fly in the balloon's row too: an agent that never moves loses lives."""
    lost = 0
    for seed in (31, 32, 33):
        session.reset(seed=seed)
        for _ in range(1500):
            step = session.step(NONE)
            lost += "life_lost" in step.events
            if step.outcome:
                break
    assert lost >= 3, lost


def scripted(values: dict[str, int]) -> int:
    """Head for the fruit; of the moves, prefer those no bird reaches soon."""
    px, py = values["player_x"], values["player_y"]
    birds = [
        (values[f"bird{n}_x"], values[f"bird{n}_y"], values[f"bird{n}_dir"])
        for n in range(NUM_BIRDS)
        if values[f"bird{n}_y"]
    ]
    want = ((values["fruit_x"] > px) - (values["fruit_x"] < px),
            (values["fruit_y"] > py) - (values["fruit_y"] < py))  # fmt: skip

    def danger(dx: int, dy: int) -> int:
        cells = {(px + dx, py + dy), (px + 2 * dx, py + 2 * dy)}
        return sum((bx + d * k, by) in cells for bx, by, d in birds for k in range(4))

    move = min(MOVES, key=lambda m: (danger(*m), abs(m[0] - want[0]) + abs(m[1] - want[1])))
    return MOVES[move]


def test_a_scripted_policy_scores_far_more_than_a_random_one(session: GameSession) -> None:
    steps = 250
    totals = {}
    for policy in ("random", "scripted"):
        scores = []
        for seed in (21, 22, 23):
            session.reset(seed=seed)
            rng = random.Random(seed)
            for _ in range(steps):
                action = rng.randrange(9) if policy == "random" else scripted(session.values)
                if session.step(action).outcome:
                    break
            scores.append(session.values["score"])
        totals[policy] = sum(scores)
    assert totals["scripted"] >= 3 * max(totals["random"], 5), totals
    assert totals["scripted"] >= 3 * 50, totals
