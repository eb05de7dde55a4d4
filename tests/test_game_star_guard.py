"""Star Guard, the bundled fixed shooter: its rules, rewards and outcomes through OakEmuEnv.

Situations are set up by writing the game's variables (addresses from star_guard.yaml) and,
where needed, its `alive` table (not a YAML variable: 24 bytes, row by row from the top, one
byte per invader, 1 = alive; see star_guard.asm).
"""

from __future__ import annotations

import random
from typing import Any

from oakemu_rl.envs import OakEmuEnv

SMALL = {"height": 42, "width": 42, "frame_stack": 2}
ALIVE = 0x802D  # the `alive` table of star_guard.asm
MOVE_TIMER = 0x801B  # frames until the formation's next march step (star_guard.asm)
LIVES, WAVE, CANNON_X, INVADERS_LEFT = 0x8007, 0x8008, 0x8009, 0x800A
FORMATION_X, FORMATION_Y, FORMATION_DIR = 0x800B, 0x800C, 0x800D
BOMB1_Y, BOMB1_X, BOMB2_Y = 0x8011, 0x8012, 0x8013


def scripted(values: dict[str, int]) -> int:
    """Dodge a low bomb; otherwise move under the nearest invader column, aiming ahead
    of its lowest invader by the formation's march during the shot's flight, and fire."""
    cx = values["cannon_x"] + 7
    for bomb in ("bomb1", "bomb2"):
        by, bx = values[f"{bomb}_y"], values[f"{bomb}_x"]
        if by >= 120 and -10 < bx - cx < 12:
            if values["cannon_x"] < 16:
                return 2
            if values["cannon_x"] > 224:
                return 1
            return 1 if bx >= cx else 2
    speed = 2 / max(2, values["invaders_left"] // 3 + 1)  # pixels a frame
    best = None
    for column in range(6):
        rows = [r for r in range(4) if values[f"row{r}_mask"] >> column & 1]
        if not rows:
            continue
        flight = (162 - values["formation_y"] - 16 * rows[-1]) / 6  # frames
        x = (values["formation_x"] + 24 * column + 4) % 256
        x += values["formation_dir"] * speed * flight
        if best is None or abs(x - cx) < abs(best - cx):
            best = x
    if best is None:
        return 0
    d = best - cx
    return 2 if d > 4 else 1 if d < -4 else 3


def only_invader(env: OakEmuEnv, row: int, column: int) -> None:
    """Leave one invader (at `row`, `column`) and put the cannon right under it."""
    alive = bytearray(24)
    alive[row * 6 + column] = 1
    machine = env.machine
    machine.write(ALIVE, bytes(alive))
    machine.write(INVADERS_LEFT, bytes([1]))
    machine.write(FORMATION_X, bytes([64]))
    machine.write(FORMATION_DIR, bytes([1]))
    machine.write(MOVE_TIMER, bytes([255]))  # the formation holds still while the shot flies
    machine.write(BOMB1_Y, bytes([0]))
    machine.write(BOMB2_Y, bytes([0]))
    machine.write(CANNON_X, bytes([64 + 24 * column + 4 - 7]))  # shot_x = cannon_x + 7


def play(
    env: OakEmuEnv, action: int, steps: int, until: str = ""
) -> tuple[list[str], list[float], dict[str, Any]]:
    """Hold one action for up to `steps` steps, stopping after the step with event `until`."""
    events: list[str] = []
    rewards: list[float] = []
    info: dict[str, Any] = {}
    for _ in range(steps):
        _, reward, terminated, truncated, info = env.step(action)
        events += info["events"]
        rewards.append(reward)
        if terminated or truncated or until in info["events"]:
            break
    return events, rewards, info


def test_start_state() -> None:
    env = OakEmuEnv("star_guard", SMALL, seed=1)
    _, info = env.reset()
    values = info["values"]
    assert values["score"] == 0 and values["lives"] == 3 and values["wave"] == 1
    assert values["invaders_left"] == 24 and values["column_mask"] == 0x3F
    assert all(values[f"row{r}_mask"] == 0x3F for r in range(4))


def test_each_hit_scores_by_row_and_fires_its_event() -> None:
    env = OakEmuEnv("star_guard", SMALL, seed=21)
    _, info = env.reset()
    hits = 0
    for _ in range(250):
        before = info["values"]
        _, reward, terminated, _, info = env.step(scripted(before))
        after = info["values"]
        if "invader_hit" in info["events"]:
            hits += 1
            gained = after["score"] - before["score"]
            assert gained in (10, 20, 30)
            assert after["invaders_left"] == before["invaders_left"] - 1
            assert after["invaders_hit"] == before["invaders_hit"] + 1
            if "cannon_hit" not in info["events"]:
                assert abs(reward - 0.1 * gained) < 1e-9
        else:
            assert after["score"] == before["score"]
        if terminated:
            break
    assert hits >= 8


def test_the_top_row_scores_30_and_the_last_invader_clears_the_wave() -> None:
    env = OakEmuEnv("star_guard", SMALL, seed=22)
    env.reset()
    only_invader(env, row=0, column=2)
    events, rewards, info = play(env, 3, 40, until="wave_cleared")
    assert "invader_hit" in events and "wave_cleared" in events
    assert info["score"] == 30 and abs(sum(rewards) - 3.0) < 1e-9
    assert info["values"]["wave"] == 2 and info["outcome"] is None
    _, _, info = play(env, 0, 10)  # the pause between waves
    values = info["values"]
    # A new wave: a full formation, one step lower than the first.
    assert values["wave"] == 2 and values["invaders_left"] == 24
    assert values["column_mask"] == 0x3F and values["formation_y"] == 24 + 8
    assert info["outcome"] is None


def test_a_bomb_on_the_cannon_costs_a_life_and_the_last_one_loses() -> None:
    env = OakEmuEnv("star_guard", SMALL, seed=23)
    _, info = env.reset()
    cannon = info["values"]["cannon_x"]
    env.machine.write(BOMB1_Y, bytes([170]))
    env.machine.write(BOMB1_X, bytes([cannon + 6]))
    events, rewards, info = play(env, 0, 3, until="cannon_hit")
    assert events.count("cannon_hit") == 1 and info["lives"] == 2
    assert rewards[-1] == -10.0 and sum(rewards) == -10.0 and info["outcome"] is None

    env.reset(seed=24)
    env.machine.write(LIVES, b"1")
    env.machine.write(BOMB1_Y, bytes([170]))
    env.machine.write(BOMB1_X, bytes([env.session.values["cannon_x"] + 6]))
    events, _, info = play(env, 0, 30)
    # The loss is decided by lives reaching 0, in the step of the hit.
    assert "cannon_hit" in events and "cannon_hit" in info["events"]
    assert info["outcome"] == "loss" and info["lives"] == 0


def test_invaders_that_land_end_the_game() -> None:
    env = OakEmuEnv("star_guard", SMALL, seed=25)
    env.reset()
    env.machine.write(FORMATION_Y, bytes([120]))  # the lowest row steps to line 168
    env.machine.write(BOMB1_Y, bytes([0]))
    env.machine.write(BOMB2_Y, bytes([0]))
    events, _, info = play(env, 0, 10)
    assert "game_over" in events and "cannon_hit" not in events
    assert info["outcome"] == "loss" and info["lives"] == 3


def test_clearing_the_third_wave_wins() -> None:
    env = OakEmuEnv("star_guard", SMALL, seed=26)
    env.reset()
    env.machine.write(WAVE, bytes([3]))
    only_invader(env, row=3, column=0)
    events, _, info = play(env, 3, 40)
    assert "wave_cleared" in events
    assert info["outcome"] == "win" and info["values"]["wave"] == 4


def test_scripted_policy_scores_far_more_than_random() -> None:
    env = OakEmuEnv("star_guard", SMALL)
    totals = {"random": 0, "scripted": 0}
    for seed in (1, 2, 3):
        for policy in totals:
            _, info = env.reset(seed=seed)
            rng = random.Random(seed)
            for _ in range(500):
                values = info["values"]
                action = rng.randrange(6) if policy == "random" else scripted(values)
                _, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            totals[policy] += info["score"]
    assert totals["random"] > 0
    assert totals["scripted"] >= 2 * totals["random"], totals
