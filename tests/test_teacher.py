"""The search teacher: its labels are the lookahead's result, its targets never favour a
lost life over a safe move, and labelling leaves the env's own episode untouched."""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np
import pytest

from oakemu_rl.envs.multi_env import OakEmuMultiEnv
from oakemu_rl.envs.oakemu_env import OakEmuEnv
from oakemu_rl.games.loader import load_game
from oakemu_rl.games.session import GameSession
from oakemu_rl.trajectories.teacher import (
    LabelWithTeacher,
    SearchTeacher,
    TeacherLabels,
    TeacherSettings,
    soft_target,
)


def _catch_state(steps: int, action: int = 0, seed: int = 100) -> bytes:
    """The machine state of catch after `steps` steps of `action` from the start."""
    session = GameSession(load_game("catch"))
    session.reset(seed)
    for _ in range(steps):
        session.step(action)
    return session.save_state()


def _exhaustive(state: bytes, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Per first action: the fewest lives lost over every action sequence of `depth`
    steps, and the most reward among the sequences that lose that few (by brute force)."""
    game = load_game("catch")
    session = GameSession(game)
    actions = range(game.num_actions)
    outcomes: dict[int, list[tuple[int, float]]] = {a: [] for a in actions}
    for sequence in itertools.product(actions, repeat=depth):
        session.reset_to_state(state)
        lives = session.values["lives"]
        lost, collected = 0, 0.0
        for action in sequence:
            step = session.step(action)
            collected += step.reward
            now = session.values["lives"]
            lost += max(0, lives - now)
            lives = now
            if step.outcome in ("win", "loss"):
                break
        outcomes[sequence[0]].append((lost, collected))
    fewest = np.array([min(lost for lost, _ in outcomes[a]) for a in actions])
    best = np.array(
        [max(r for lost, r in outcomes[a] if lost == fewest[a]) for a in actions],
        dtype=np.float32,
    )
    return fewest, best


def test_label_equals_an_exhaustive_lookahead() -> None:
    # The ball lands within the 4 steps looked at (at step 31 of this episode), so the
    # actions differ: some catch it, some miss it. With a beam wider than every path
    # (3^3 = 27), the search is exhaustive and must agree with brute force exactly.
    differing = 0
    for steps in (29, 30):
        state = _catch_state(steps)
        teacher = SearchTeacher(load_game("catch"), TeacherSettings(horizon=3, width=27))
        label = teacher.label(state)
        fewest, best = _exhaustive(state, 4)
        assert label.lives_lost.tolist() == fewest.tolist()
        np.testing.assert_allclose(label.returns, best)
        assert label.simulated_steps <= TeacherSettings(horizon=3, width=27).cost(3)
        # Labelling again (from the same bytes) gives the same label.
        again = teacher.label(state)
        assert again.lives_lost.tolist() == label.lives_lost.tolist()
        np.testing.assert_array_equal(again.target, label.target)
        differing += len(set(fewest.tolist())) > 1 or len(set(best.tolist())) > 1
    assert differing, "every action had the same outcome: the comparison checks little"


def test_target_puts_no_mass_on_a_lost_life_where_a_safe_move_exists() -> None:
    teacher = SearchTeacher(load_game("catch"), TeacherSettings(horizon=14, width=8), seed=1)
    mixed = 0
    for steps in range(16, 32):
        label = teacher.label(_catch_state(steps))
        assert label.target.sum() == pytest.approx(1.0)
        assert (label.target >= 0).all()
        if label.lives_lost.min() < label.lives_lost.max():
            mixed += 1
            assert label.target[~label.safe].sum() == 0.0
            assert label.safe[label.best_action]
    assert mixed > 0, "no state with both safe and losing moves: the test checks nothing"


def _survives(
    session: GameSession, state: bytes, depth: int, failed: set[tuple[bytes, int]]
) -> bool:
    """Whether some action sequence from `state` loses no life of catch for `depth` steps
    (plain depth-first search)."""
    if depth == 0:
        return True
    if (state, depth) in failed:
        return False
    for action in range(3):
        session.reset_to_state(state)
        lives = session.values["lives"]
        step = session.step(action)
        if session.values["lives"] < lives or step.outcome == "loss":
            continue
        if step.outcome == "win" or _survives(session, session.save_state(), depth - 1, failed):
            return True
    failed.add((state, depth))
    return False


def test_verification_finds_the_safe_futures_a_narrow_beam_prunes() -> None:
    game = load_game("catch")
    session = GameSession(game)
    pruned = 0
    steps_taken = {"safety": 0, "beam": 0}
    for steps in range(16, 32):
        state = _catch_state(steps)
        safe = []
        for action in range(3):
            session.reset_to_state(state)
            lives = session.values["lives"]
            session.step(action)
            kept = session.values["lives"] == lives
            safe.append(kept and _survives(session, session.save_state(), 14, set()))
        narrow = TeacherSettings(horizon=14, width=8, verify_budget=0)
        beam = SearchTeacher(game, narrow, seed=1).label(state)
        verified = SearchTeacher(game, TeacherSettings(horizon=14, width=8), seed=1).label(state)
        # The beam's safe verdicts are found paths, so always right; the check corrects
        # its unsafe ones and never adds a loss.
        assert not ((beam.lives_lost == 0) & ~np.array(safe)).any()
        assert (verified.lives_lost == 0).tolist() == safe, steps
        assert (verified.lives_lost <= beam.lives_lost).all()
        pruned += (beam.lives_lost > 0).sum() > (~np.array(safe)).sum()
        # Actions the beam kept keep its returns; rescued ones get their path's return.
        assert np.isfinite(verified.returns).all()
        # The safety search alone finds the same safe set, and spreads the target evenly.
        safety = SearchTeacher(game, TeacherSettings(horizon=14, search="safety")).label(state)
        assert (safety.lives_lost == 0).tolist() == safe, steps
        by_situation = TeacherSettings(horizon=14, search="safety", prune="situation")
        assert (SearchTeacher(game, by_situation).label(state).lives_lost == 0).tolist() == safe
        if any(safe):
            np.testing.assert_allclose(safety.target, np.array(safe) / sum(safe), rtol=1e-6)
        steps_taken["safety"] += safety.simulated_steps
        steps_taken["beam"] += verified.simulated_steps
    assert pruned > 0, "the beam pruned no safe future: the test checks nothing"
    assert steps_taken["safety"] < steps_taken["beam"] / 2  # measured: about 1/6


@functools.cache
def _forest_run_critical_states(count: int) -> list[bytes]:
    """The first `count` states of a forest_run game (seed 3, sector 1) on which some move
    loses a life, each move the first safe one of an exact safety label."""
    game = load_game("forest_run")
    exact = SearchTeacher(game, TeacherSettings(horizon=12, search="safety", verify_budget=50_000))
    session = GameSession(game)
    session.reset(3)
    states = []
    while len(states) < count:
        state = session.save_state()
        label = exact.label(state)
        if not label.safe.all():
            states.append(state)
        assert session.step(label.best_action).outcome is None
    return states


def test_situation_pruning_finds_the_same_safe_moves_in_fewer_steps() -> None:
    """forest_run's SPACE fires a shot: moves with and without it reach states that differ
    only in the shot, which the YAML does not name. Remembering failures by situation
    searches them once: the same safe moves as the exact search, for fewer steps."""
    game = load_game("forest_run")
    settings = TeacherSettings(horizon=12, search="safety", verify_budget=50_000)
    by_state = SearchTeacher(game, settings)
    by_situation = SearchTeacher(game, dataclasses.replace(settings, prune="situation"))
    steps = {"state": 0, "situation": 0}
    for state in _forest_run_critical_states(40):
        exact, merged = by_state.label(state), by_situation.label(state)
        assert merged.safe.tolist() == exact.safe.tolist()
        steps["state"] += exact.simulated_steps
        steps["situation"] += merged.simulated_steps
    assert steps["situation"] < 0.7 * steps["state"], steps


def test_a_search_cut_short_favours_the_moves_that_got_furthest() -> None:
    """With a budget far too small to finish any search (12 steps for 6 moves), the target
    still goes to the moves whose paths lasted longest, not evenly over every move: never
    to one that crashes in its first step, and seldom to one the full search finds
    unsafe."""
    game = load_game("forest_run")
    tiny = SearchTeacher(game, TeacherSettings(horizon=12, search="safety", verify_budget=12))
    full = SearchTeacher(game, TeacherSettings(horizon=12, search="safety", verify_budget=50_000))
    session = GameSession(game)
    unsafe_mass = []
    crashing_at_once = 0
    for state in _forest_run_critical_states(40):
        label, truth = tiny.label(state), full.label(state)
        assert label.lives_lost.min() > 0  # nothing was found: the budget is all used
        for action in range(game.num_actions):
            session.reset_to_state(state)
            lives = session.values["lives"]
            session.step(action)
            if session.values["lives"] < lives:
                crashing_at_once += 1
                assert label.target[action] == 0
        unsafe_mass.append(label.target[~truth.safe].sum())
    assert crashing_at_once > 0, "no move crashed at once: the test checks little"
    assert np.mean(unsafe_mass) < 0.1, np.mean(unsafe_mass)


def _after(session: GameSession, state: bytes, actions: tuple[int, ...]) -> bytes | None:
    """catch's state after `actions` from `state`, or None if they lose a life."""
    session.reset_to_state(state)
    for action in actions:
        lives = session.values["lives"]
        step = session.step(action)
        if session.values["lives"] < lives or step.outcome == "loss":
            return None
    return session.save_state()


def test_the_margin_target_weights_each_safe_move_by_the_room_it_leaves() -> None:
    """search="margin": on the safe set, mass in proportion to how many moves one step
    later still survive the rest of the horizon, by brute force; none elsewhere."""
    game = load_game("catch")
    session = GameSession(game)
    uneven = 0
    for steps in range(16, 32):
        state = _catch_state(steps)
        room = np.zeros(3)
        for first in range(3):
            after_first = _after(session, state, (first,))
            if after_first is None or not _survives(session, after_first, 14, set()):
                continue
            for second in range(3):
                after_second = _after(session, after_first, (second,))
                room[first] += after_second is not None and _survives(
                    session, after_second, 13, set()
                )
        label = SearchTeacher(game, TeacherSettings(horizon=14, search="margin")).label(state)
        assert (label.lives_lost == 0).tolist() == (room > 0).tolist(), steps
        if room.sum():
            np.testing.assert_allclose(label.target, room / room.sum(), rtol=1e-6)
            uneven += len(set(room[room > 0].tolist())) > 1
    assert uneven, "every safe move left the same room: the test checks little"


def test_soft_target_orders_safe_moves_by_return() -> None:
    target = soft_target(np.array([0, 0, 1]), np.array([1.0, 0.0, 5.0]), temperature=1.0)
    assert target[2] == 0.0
    assert target[0] > target[1] > 0
    assert target[0] / target[1] == pytest.approx(np.e, rel=1e-5)
    sharp = soft_target(np.array([0, 0, 1]), np.array([1.0, 0.0, 5.0]), temperature=0.01)
    assert sharp[0] == pytest.approx(1.0)


def test_a_spread_temperature_ignores_the_reward_weights() -> None:
    lives_lost = np.array([0, 0, 0, 1])
    returns = np.array([0.2, 0.1, 0.0, 5.0])  # one pickup worth 0.1 apart, in the YAML's units
    spread = soft_target(lives_lost, returns, temperature=0.25, scale="spread")
    # The same game with every reward weighed 100 times as much: the same target.
    np.testing.assert_allclose(
        soft_target(lives_lost, returns * 100, temperature=0.25, scale="spread"), spread
    )
    assert spread[3] == 0.0
    # Best to worst safe move is e^(1 / 0.25), whatever the spread.
    assert spread[0] / spread[2] == pytest.approx(np.exp(4.0), rel=1e-5)
    assert spread[0] / spread[1] == pytest.approx(np.exp(2.0), rel=1e-5)
    # In reward units, a difference of 0.2 barely moves the target at temperature 1...
    flat = soft_target(lives_lost, returns, temperature=1.0)
    assert flat[0] / flat[2] == pytest.approx(np.exp(0.2), rel=1e-5)
    # ...and where every safe move returns the same, either target is even over them.
    even = soft_target(np.array([0, 0, 1]), np.array([3.0, 3.0, 9.0]), 0.25, scale="spread")
    np.testing.assert_allclose(even, [0.5, 0.5, 0.0])


def test_labelling_leaves_the_episode_untouched() -> None:
    settings = TeacherSettings(horizon=4, width=4)
    plain = OakEmuEnv("catch", seed=3)
    labelled = TeacherLabels(OakEmuEnv("catch", seed=3), settings)
    obs_a, _ = plain.reset()
    obs_b, info = labelled.reset()
    np.testing.assert_array_equal(obs_a, obs_b)
    assert len(info["teacher"]["target"]) == 3
    rng = np.random.default_rng(0)
    for _ in range(60):
        action = int(rng.integers(3))
        a = plain.step(action)
        b = labelled.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]
        assert "teacher" in b[4]
        assert b[4]["teacher"]["simulated_steps"] > 0
    assert plain.save_state() == labelled.save_state()


def test_workers_label_their_envs() -> None:
    env = OakEmuMultiEnv(
        "catch",
        num_envs=2,
        num_workers=2,
        backend="process",
        seed=0,
        env_wrapper=LabelWithTeacher(TeacherSettings(horizon=2, width=3)),
    )
    try:
        env.reset_all()
        seen = 0
        while seen < 10:
            for result in env.poll(timeout=30):
                label = result.info["teacher"]
                assert len(label["target"]) == 3
                assert sum(label["target"]) == pytest.approx(1.0)
                seen += 1
                env.submit(result.env_id, 0)
    finally:
        env.close()
    with pytest.raises(ValueError, match="env_wrapper"):
        OakEmuMultiEnv(
            env_factory=lambda i: OakEmuEnv("catch"),
            num_envs=1,
            backend="inline",
            env_wrapper=LabelWithTeacher(TeacherSettings()),
        )


def test_hidden_variables_leave_only_the_moves_safe_whatever_they_hold() -> None:
    """forest_run's frame counters say on which frame of a step the forest scrolls and the
    player steers; the screen does not show them. With them hidden, a label keeps only the
    moves that are safe with every value they could hold, where some move loses a life."""
    game = load_game("forest_run")
    plain = SearchTeacher(game, TeacherSettings(horizon=12, search="safety"))
    hidden = (("scroll_timer", 1, "scroll_period"), ("steer_timer", 1, 2))
    robust = SearchTeacher(game, TeacherSettings(horizon=12, search="safety", hidden=hidden))
    session = GameSession(game)
    session.reset(3)
    narrowed = 0
    for _ in range(300):  # sectors 1 and 2, where trees come one row a step
        state = session.save_state()
        own, label = plain.label(state), robust.label(state)
        assert label.safe.any() and not (label.safe & ~own.safe).any()
        assert label.target[~label.safe].sum() == 0
        assert label.safe.all() or not own.safe.all()  # no move is wrong: nothing checked
        if (label.safe != own.safe).any():
            narrowed += 1
            variants = list(robust.hidden_variants(state))
            period = session.values["scroll_period"]
            assert len(variants) == period * 2 - 1  # every other combination
            verdicts = [plain.label(v).safe for v in variants]
            for action in np.flatnonzero(label.safe):
                assert all(v[action] for v in verdicts if (v & label.safe).any())
            for action in np.flatnonzero(own.safe & ~label.safe):
                assert any(not v[action] and (v & own.safe).any() for v in verdicts)
            break
        step = session.step(own.best_action)
        assert step.outcome is None
    assert narrowed == 1, "no state whose safe moves hang on the hidden counters"
    with pytest.raises(ValueError, match=r"'frame' is not a data variable of .*forest_run\.yaml"):
        SearchTeacher(game, TeacherSettings(search="safety", hidden=(("frame", 0, 3),)))
    with pytest.raises(ValueError, match="'period' is not a data variable"):
        SearchTeacher(game, TeacherSettings(hidden=(("steer_timer", 1, "period"),)))


def test_hidden_ranges_that_are_empty_or_too_many_are_refused() -> None:
    """Ranges are checked when the teacher is made (bounds that name a variable read at
    the game's start) and again whenever a label reads them: empty, or more combinations
    than a label can check."""
    game = load_game("forest_run")
    with pytest.raises(ValueError, match=r"'steer_timer': range \[2, 1\] is empty"):
        SearchTeacher(game, TeacherSettings(hidden=(("steer_timer", 2, 1),)))
    wide = (("scroll_timer", 0, 255), ("steer_timer", 0, 255))
    with pytest.raises(ValueError, match=r"65536 combinations at the start .*; at most 1024"):
        SearchTeacher(game, TeacherSettings(hidden=wide))
    reversed_ = (("steer_timer", "scroll_period", 1),)  # scroll_period is 4 at the start
    with pytest.raises(ValueError, match=r"reads as \[4, 1\] at the start and is empty"):
        SearchTeacher(game, TeacherSettings(hidden=reversed_))
    session = GameSession(game)
    session.reset(3)
    assert session.values["scroll_period"] == 4
    session.write_value("scroll_period", 8)  # as if in a later sector
    state = session.save_state()
    empty = SearchTeacher(game, TeacherSettings(hidden=(("steer_timer", "scroll_period", 5),)))
    with pytest.raises(ValueError, match=r"reads as \[8, 5\] in this state and is empty"):
        next(empty.hidden_variants(state))
    wide = (("scroll_timer", 0, 200), ("steer_timer", 1, "scroll_period"))  # 804 at the start
    many = SearchTeacher(game, TeacherSettings(hidden=wide))
    with pytest.raises(ValueError, match="1608 combinations in this state"):
        next(many.hidden_variants(state))
    fine = SearchTeacher(game, TeacherSettings(hidden=(("steer_timer", 1, "scroll_period"),)))
    assert len(list(fine.hidden_variants(state))) == 7  # 1..8, less the value it holds


def test_failures_carried_over_an_episode_give_the_same_labels_in_fewer_steps() -> None:
    """Labels of one episode's consecutive states, given their steps, keep the failures
    the earlier ones found: with failures remembered by the exact state, the very same
    verdicts as labels searched afresh, for fewer emulator steps; a label at an earlier
    step starts a new episode and searches afresh."""
    game = load_game("forest_run")
    settings = TeacherSettings(horizon=12, search="safety", verify_budget=50_000)
    carrying, fresh = SearchTeacher(game, settings), SearchTeacher(game, settings)
    session = GameSession(game)
    session.reset(3)
    steps = {"carrying": 0, "fresh": 0}
    critical = 0
    for step in range(80):
        state = session.save_state()
        carried, afresh = carrying.label(state, step), fresh.label(state)
        assert carried.lives_lost.tolist() == afresh.lives_lost.tolist(), step
        steps["carrying"] += carried.simulated_steps
        steps["fresh"] += afresh.simulated_steps
        critical += not afresh.safe.all()
        assert session.step(afresh.best_action).outcome is None
    assert critical > 10, "few critical states: the test checks little"
    assert steps["carrying"] < steps["fresh"], steps
    # Back to the start: a new episode, whose first label owes nothing to the last one's.
    session.reset(3)
    start = session.save_state()
    again, afresh = carrying.label(start, 0), fresh.label(start)
    assert again.simulated_steps == afresh.simulated_steps
    assert again.lives_lost.tolist() == afresh.lives_lost.tolist()


def test_an_env_s_labels_carry_the_memo_over_its_episode() -> None:
    """`TeacherLabels` gives the teacher each state's step, so training's labels keep the
    memo: the same labels as a teacher searching each state afresh, in fewer steps, and
    again from the start after a reset."""
    settings = TeacherSettings(horizon=12, search="safety", verify_budget=50_000)
    labelled = TeacherLabels(OakEmuEnv("catch", seed=3), settings)
    fresh = SearchTeacher(load_game("catch"), settings)
    steps = {"env": 0, "fresh": 0}
    for _ in range(2):
        _, info = labelled.reset()
        for _ in range(60):
            afresh = fresh.label(labelled.save_state())
            assert list(info["teacher"]["lives_lost"]) == afresh.lives_lost.tolist()
            steps["env"] += info["teacher"]["simulated_steps"]
            steps["fresh"] += afresh.simulated_steps
            *_, terminated, truncated, info = labelled.step(afresh.best_action)
            assert not (terminated or truncated)
    assert steps["env"] < 0.8 * steps["fresh"], steps
