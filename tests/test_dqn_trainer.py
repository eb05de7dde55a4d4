"""Trainer: step counting, episodes, trajectories, and the replay pipeline
(freeze_replay_pipeline consistency, replace_replay_buffer)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.experiments import DQNExperiment


def cartpole_config(**overrides: Any) -> DQNExperimentConfiguration:
    data: dict[str, Any] = {
        "game": "gym:CartPole-v1",
        "total_steps": 1500,
        "env": {"num_envs": 3, "backend": "inline"},
        "learner": {"learning_starts": 10**6},
        "replay": {"capacity": 5000, "n_step": 3, "stage_size": 7},
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": 10**6},
        "logging": {"console": False, "tensorboard": False, "log_every_steps": 100},
        "torch_threads": 1,
    }
    for key, value in overrides.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    return DQNExperimentConfiguration.from_dict(data)


def built(tmp_path: Path, **overrides: Any) -> DQNExperiment:
    experiment = DQNExperiment(
        cartpole_config(**overrides), tmp_path / "run", console=False, print_fn=lambda _: None
    )
    experiment.build()
    experiment.writer.start()
    return experiment


def test_trainer_counts_steps_episodes_and_trajectories(tmp_path: Path) -> None:
    experiment = built(tmp_path)
    trainer = experiment.trainer
    try:
        trainer.run()
        trainer.replay_writer.drain()
        assert trainer.steps == 1500
        assert trainer.total_episodes > 10
        assert trainer.total_losses + trainer.total_truncated == trainer.total_episodes
        assert trainer.staged_transition_count == 0 and trainer.replay_queue_depth == 0
        buffer = trainer.replay_buffer
        assert buffer.total_added + buffer.pending_count == 1500  # every step is in replay
        coordinator = trainer.trajectory_runtime
        assert coordinator.total_recorded == trainer.total_episodes
        best = coordinator.best[0]
        assert best.length == len(best.rewards) and best.episode_return == pytest.approx(
            sum(best.rewards)
        )
        assert best.outcome in ("loss", "truncated")
        assert experiment.memory.get("episode/return") is not None
        assert experiment.memory.get("train/epsilon") == pytest.approx(1.0 - 0.98 * 1500 / 40_000)
    finally:
        experiment.close()


def test_freeze_replay_pipeline_is_consistent(tmp_path: Path) -> None:
    experiment = built(tmp_path, total_steps=10**6)
    trainer = experiment.trainer
    buffer = trainer.replay_buffer
    checks: list[tuple[int, int, int, int]] = []

    def on_actor_thread(step: int) -> None:
        with trainer.freeze_replay_pipeline():
            checks.append(
                (
                    step,
                    trainer.staged_transition_count,
                    trainer.replay_queue_depth,
                    buffer.total_added + buffer.pending_count,
                )
            )

    trainer.add_step_hook(250, on_actor_thread)
    actor = threading.Thread(target=trainer.run)
    actor.start()
    frozen_checks = 0
    try:
        deadline = time.monotonic() + 60
        while actor.is_alive() and frozen_checks < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            if trainer.steps < 200:
                continue
            with trainer.freeze_replay_pipeline():  # from another thread, while the actor runs
                assert trainer.replay_queue_depth == 0
                before = (buffer.total_added, buffer.pending_count, buffer._next_frame_id)
                steps_before = trainer.steps
                time.sleep(0.2)
                # no insert while frozen, even though the actor goes on staging
                assert (buffer.total_added, buffer.pending_count, buffer._next_frame_id) == before
                if trainer.steps > steps_before:
                    assert trainer.staged_transition_count > 0
                    frozen_checks += 1
    finally:
        experiment.context.request_stop()
        actor.join(60)
    trainer.replay_writer.drain()
    assert frozen_checks >= 1
    # on the actor thread, at an exact step: every step taken is in the buffer
    assert [c[0] for c in checks] == list(range(250, 250 * len(checks) + 1, 250))
    assert len(checks) >= 2
    for step, staged, depth, in_buffer in checks:
        assert (staged, depth, in_buffer) == (0, 0, step)
    assert buffer.total_added + buffer.pending_count == trainer.steps
    experiment.close()


def test_replace_replay_buffer_reconnects_the_writer(tmp_path: Path) -> None:
    experiment = built(tmp_path, total_steps=2000)
    trainer = experiment.trainer
    old = trainer.replay_buffer
    new = old.clone_empty()
    seen: dict[str, int] = {}

    def swap(step: int) -> None:
        trainer.replace_replay_buffer(new)
        seen["old_total"] = old.total_added + old.pending_count

    trainer.add_step_hook(1000, swap)
    trainer.run()
    trainer.replay_writer.drain()
    assert trainer.replay_buffer is new and trainer.replay_writer.replay_buffer is new
    assert seen["old_total"] == 1000 and old.total_added + old.pending_count == 1000
    assert new.total_added + new.pending_count == 1000
    # transitions in the new buffer start from full observations: all consistent
    batch = new.sample(256, np.random.default_rng(0))
    assert np.all(np.isfinite(batch.observations)) and np.abs(batch.observations).max() < 10
    experiment.close()


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_configured_worker_nice_reaches_the_worker_processes(algo: str) -> None:
    import os

    from oakemu_rl.runtime.env_owner import make_multi_env
    from ppo_testing import small_config

    env_settings = {"num_envs": 2, "num_workers": 1, "backend": "process"}
    parent = os.getpriority(os.PRIO_PROCESS, 0)
    if algo == "dqn":
        config = cartpole_config(env=env_settings)
        assert config.env.worker_nice == "idle"  # one default for both algorithms
        with make_multi_env(config) as env:
            env.reset_all()
            env.poll(timeout=10)
            assert [os.sched_getscheduler(pid) for pid in env.worker_pids] == [os.SCHED_IDLE]
        config = cartpole_config(env={**env_settings, "worker_nice": 10})
        env = make_multi_env(config)
        expected = 10
    else:
        config = small_config(env={**env_settings, "worker_nice": 3})
        assert small_config().env.worker_nice == "idle"
        env = make_multi_env(config)
        expected = 3
    with env:
        env.reset_all()
        env.poll(timeout=10)
        assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in env.worker_pids] == [
            min(19, parent + expected)
        ]
    with pytest.raises(ValueError, match="worker_nice"):
        cartpole_config(env={"worker_nice": 25})
    with pytest.raises(ValueError, match="worker_nice"):
        cartpole_config(env={"worker_nice": "lowest"})
