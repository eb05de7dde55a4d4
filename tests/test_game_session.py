"""Rewards, events and episode outcomes computed by GameSession (on the counter game)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from oakemu_rl.games import GameSession, load_game
from z80_programs import RESULTS

WriteGame = Callable[..., Path]


def test_reward_combines_variable_rise_events_and_time(write_game: WriteGame) -> None:
    session = GameSession(load_game(write_game()))
    session.reset(seed=1)
    session.step(0)  # run_until left the machine mid-frame: this step ends that frame
    total_rare = 0
    for _ in range(8):
        before = session.values["score"]
        step = session.step(0)
        rise = step.values["score"] - before
        rare = "rare" in step.events
        total_rare += rare
        assert rise == 2  # frame_skip 2, one increment a frame
        assert step.reward == rise * 1.0 + 5.0 * rare - 0.5
        assert "tick" in step.events
    assert total_rare == 4  # every 4th frame over 16 frames


def test_variable_fall_uses_penalty(write_game: WriteGame) -> None:
    path = write_game({"reward": {"variables": {"lives": {"reward": 3.0, "penalty": 10.0}}}})
    session = GameSession(load_game(path))
    session.reset(seed=0)
    session.machine.write(RESULTS + 4, b"3")
    session.step(0)
    session.machine.write(RESULTS + 4, b"2")
    assert session.step(0).reward == -10.0
    session.machine.write(RESULTS + 4, b"4")
    assert session.step(0).reward == 2 * 3.0


def test_win_loss_and_truncation(write_game: WriteGame) -> None:
    session = GameSession(load_game(write_game()))
    session.reset(seed=0)
    outcomes = [session.step(0).outcome for _ in range(40)]
    assert "win" in outcomes  # score reaches 60 after ~30 steps
    assert outcomes.index("win") < 35

    path = write_game({"episode": {"win": [], "loss": [{"event": "rare"}]}}, name="loss.yaml")
    session = GameSession(load_game(path))
    session.reset(seed=0)
    first = [session.step(0) for _ in range(3)]
    assert any(s.outcome == "loss" for s in first)

    path = write_game({"episode": None}, name="trunc.yaml")
    session = GameSession(load_game(path))
    session.reset(seed=0)
    outcomes = [session.step(0).outcome for _ in range(40)]
    assert outcomes[:-1] == [None] * 39 and outcomes[-1] == "truncated"


def test_delta_measurement(write_game: WriteGame) -> None:
    cond = {"variable": "score", "op": "greater-than", "reference": 2, "measurement": "delta"}
    session = GameSession(load_game(write_game({"episode": {"win": [cond]}})))
    session.reset(seed=0)
    assert session.step(0).outcome is None  # +2 a step is not > 2
    session.machine.write(RESULTS, bytes([session.values["score"] + 5]))
    assert session.step(0).outcome == "win"


def test_randomize_is_seeded_and_never_zero(write_game: WriteGame) -> None:
    session = GameSession(load_game(write_game()))
    seeds = []
    for seed in (1, 2, 1):
        session.reset(seed=seed)
        seeds.append(session.values["seed"])
    assert seeds[0] == seeds[2] != seeds[1]
    assert all(value != 0 for value in seeds)


def test_randomize_redraws_a_saved_games_variables(write_game: WriteGame) -> None:
    session = GameSession(load_game(write_game()))
    session.reset(seed=1)
    state, seeded = session.save_state(), session.values["seed"]
    drawn = []
    for _ in range(2):
        session.reset_to_state(state)
        session.randomize(["seed"], np.random.default_rng(7))
        drawn.append(session.read_values()["seed"])
    assert drawn[0] == drawn[1]  # the same generator draws the same value
    assert drawn[0] not in (0, seeded)
    session.reset_to_state(state)
    session.randomize(["seed"], np.random.default_rng(8))
    assert session.read_values()["seed"] not in (0, drawn[0])


def test_reset_to_state_resumes_the_same_game(write_game: WriteGame) -> None:
    session = GameSession(load_game(write_game()))
    session.reset(seed=3)
    for _ in range(5):
        session.step(1)
    state = session.save_state()
    later = [session.step(2) for _ in range(5)]
    session.reset_to_state(state)
    again = [session.step(2) for _ in range(5)]
    assert later == again
