"""The reward split by source: per step (GameSession, OakEmuEnv, OakEmuMultiEnv), per
training episode (`episode/reward/<term>` in TensorBoard), on real games."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.envs import OakEmuEnv, OakEmuMultiEnv
from oakemu_rl.envs.multi_env import Backend
from oakemu_rl.experiments import DQNExperiment
from oakemu_rl.games import GameSession, load_game
from oakemu_rl.games.session import reward_term_names
from oakemu_rl.runtime.episode_metrics import EpisodeMetrics

pytestmark = pytest.mark.timeout(120)

WriteGame = Callable[..., Path]
RAM = {"type": "ram", "ram": ["ball_x", "ball_y", "paddle_x"], "frame_stack": 1}


def added_up(terms: dict[str, float]) -> float:
    """The terms added in their order, as GameSession adds them into the reward."""
    total = 0.0
    for value in terms.values():
        total += value
    return total


@pytest.mark.parametrize(("key", "steps"), [("catch", 600), ("maze_gems", 800)])
def test_each_steps_terms_add_up_to_its_reward_under_the_yamls_names(key: str, steps: int) -> None:
    game = load_game(key)
    reward = game.spec.reward
    session = GameSession(game)
    session.reset(seed=3)
    rng = np.random.default_rng(3)
    seen: set[str] = set()
    lives_lost = 0
    for _ in range(steps):
        before = session.values
        step = session.step(int(rng.integers(game.num_actions)))
        assert added_up(step.reward_terms) == step.reward  # bit for bit
        assert all(value != 0.0 for value in step.reward_terms.values())
        seen |= step.reward_terms.keys()
        fell = before["lives"] - step.values["lives"]
        if fell > 0:
            lives_lost += fell
            assert step.reward_terms["lives"] == -fell * reward.variables["lives"].penalty
        else:
            assert "lives" not in step.reward_terms
        rose = step.values["score"] - before["score"]
        if rose > 0:
            assert step.reward_terms["score"] == rose * reward.variables["score"].reward
        if step.outcome is not None:
            session.reset(seed=int(rng.integers(1000)))
    assert lives_lost > 0 and seen == {"score", "lives"}
    assert set(reward_term_names(game.spec).values()) == {"score", "lives", "time"}


def test_time_events_and_an_event_named_like_a_variable(write_game: WriteGame) -> None:
    # The counter game: score rises 2 a step (reward 1), time -0.5 a step, and its 'rare'
    # routine renamed 'score' (reward 5): that event's term is `event:score`.
    path = write_game({
        "routines": {"tick": 0x8100, "score": 0x8110},
        "reward": {"variables": {"score": {"reward": 1.0}}, "events": {"score": 5.0},
                   "time": -0.5},
    })  # fmt: skip
    session = GameSession(load_game(path))
    session.reset(seed=1)
    session.step(0)
    steps = [session.step(0) for _ in range(8)]
    for step in steps:
        assert step.reward_terms["score"] == 2.0 and step.reward_terms["time"] == -0.5
        assert step.reward_terms.get("event:score", 0.0) == 5.0 * ("score" in step.events)
        assert added_up(step.reward_terms) == step.reward
        assert list(step.reward_terms)[:2] == ["time", "score"]  # the order they are added in
    assert sum("event:score" in step.reward_terms for step in steps) == 4


def test_oakemu_env_info_carries_the_terms() -> None:
    env = OakEmuEnv("catch", RAM, seed=5)
    _, info = env.reset()
    assert info["reward_terms"] == {}
    total, lives = 0.0, 0.0
    done = False
    while not done:
        _, reward, terminated, truncated, info = env.step(0)  # never move: 5 misses
        assert added_up(info["reward_terms"]) == reward
        total += reward
        lives += info["reward_terms"].get("lives", 0.0)
        done = terminated or truncated
    assert lives == -5.0 * load_game("catch").spec.reward.variables["lives"].penalty
    assert info["episode_return"] == total


def stream_of_terms(backend: Backend) -> list[list[tuple[float, dict[str, float]]]]:
    """Each env's (reward, reward_terms) per step, for per-env random actions."""
    per_env: list[list[tuple[float, dict[str, float]]]] = [[], []]
    with OakEmuMultiEnv(
        "catch", num_envs=2, num_workers=2, backend=backend, seed=7, observation_config=RAM
    ) as envs:
        envs.reset_all()
        rngs = [np.random.default_rng(40 + i) for i in range(2)]
        while envs.in_flight:
            for r in envs.poll():
                record = per_env[r.env_id]
                if not r.is_reset:
                    record.append((r.reward, dict(r.info["reward_terms"])))
                if len(record) == 400:
                    continue
                if r.done:
                    envs.submit_reset(r.env_id)
                else:
                    envs.submit(r.env_id, int(rngs[r.env_id].integers(envs.action_space.n)))
    return per_env


def test_terms_arrive_through_the_inline_and_process_backends_alike() -> None:
    inline = stream_of_terms("inline")
    assert inline == stream_of_terms("process")
    for steps in inline:
        assert all(added_up(terms) == reward for reward, terms in steps)
        assert any("lives" in terms for _, terms in steps)


def test_episode_metrics_log_each_term_once_seen_and_load_old_state() -> None:
    metrics = EpisodeMetrics()
    common: dict[str, Any] = {"length": 10, "score": 0.0, "outcome": "loss"}
    first = metrics.record(episode_return=-5.0, step=10, reward_terms={"lives": -5.0}, **common)
    assert first["episode/reward/lives"] == -5.0 and "episode/reward/score" not in first
    second = metrics.record(episode_return=3.0, step=20, reward_terms={"score": 3.0}, **common)
    assert second["episode/reward/score"] == 3.0 and second["episode/reward/lives"] == 0.0
    # A Gymnasium env has no terms: nothing extra until one is seen.
    bare = EpisodeMetrics().record(episode_return=9.0, step=9, **common)
    assert not any(name.startswith("episode/reward/") for name in bare)

    state = metrics.state_dict()
    resumed = EpisodeMetrics()
    resumed.load_state_dict(state)
    assert resumed.reward_terms == metrics.reward_terms
    state.pop("reward_terms")  # a checkpoint written before reward terms
    old = EpisodeMetrics()
    old.load_state_dict(state)
    assert old.reward_terms == [] and old.totals.total_episodes == 2


def test_training_logs_each_episodes_reward_by_source(tmp_path: Path) -> None:
    config = DQNExperimentConfiguration.from_dict({
        "game": "catch",
        "total_steps": 1024,
        "torch_threads": 1,
        "env": {"num_envs": 2, "backend": "inline", "observation": RAM},
        "model": {"mlp_hidden": [32], "head_hidden": 0},
        "learner": {"learning_starts": 64, "batch_size": 16},
        "replay": {"capacity": 1000},
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": 1024, "save_replay_buffer": False},
        "logging": {"console": False, "tensorboard": True, "log_every_steps": 256},
    })  # fmt: skip
    run_dir = tmp_path / "run"
    DQNExperiment(config, run_dir, console=False, print_fn=lambda _: None).run()
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"episode/reward/score", "episode/reward/lives"} <= set(tags)
    terms = [tag for tag in tags if tag.startswith("episode/reward/")]
    by_step: dict[int, float] = {}
    for tag in terms:
        for event in events.Scalars(tag):
            by_step[event.step] = by_step.get(event.step, 0.0) + event.value
    returns = {event.step: event.value for event in events.Scalars("episode/return")}
    assert len(returns) >= 3
    # Every episode's terms add up to its return (a term is logged from its first
    # non-zero episode on; before that it was 0 in every episode).
    for step, episode_return in returns.items():
        assert by_step.get(step, 0.0) == pytest.approx(episode_return, abs=1e-5)
    assert set(by_step) <= set(returns)
