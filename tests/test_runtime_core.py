"""RuntimeContext, EpisodeMetrics, EnvLifecycle, ActorRuntimeState, metrics sinks and the
trajectory coordinator."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import torch

from oakemu_rl.envs import StepResult
from oakemu_rl.runtime import (
    ActorRuntimeState,
    EnvLifecycle,
    EpisodeMetrics,
    EpisodeTotals,
    MemorySink,
    RuntimeContext,
    TensorBoardSink,
)
from oakemu_rl.runtime.metrics import ConsoleSink
from oakemu_rl.trajectories import TrajectoryEpisodeCoordinator


def test_context_rngs_are_seeded(tmp_path: Path) -> None:
    a = RuntimeContext(config={"x": 1}, device=torch.device("cpu"), run_dir=tmp_path, seed=7)
    b = RuntimeContext(config={"x": 1}, device=torch.device("cpu"), run_dir=tmp_path, seed=7)
    assert a.rng.random() == b.rng.random()
    assert a.spawn_rng("learner").random() == b.spawn_rng("learner").random()
    assert a.spawn_rng("learner").random() != a.spawn_rng("tester").random()
    state = a.rng_state()
    value = a.rng.random()
    a.set_rng_state(json.loads(json.dumps(state)))
    assert a.rng.random() == value
    assert not a.stopping
    a.report_error(ValueError("boom"))
    assert a.stopping and isinstance(a.errors[0], ValueError)


def test_episode_metrics_and_state() -> None:
    metrics = EpisodeMetrics(window=2)
    metrics.record(episode_return=1.0, length=10, score=1, outcome="win", step=10)
    metrics.record(episode_return=3.0, length=20, score=3, outcome="loss", step=30)
    scalars = metrics.record(episode_return=5.0, length=30, score=5, outcome="truncated", step=60)
    assert scalars["episode/return_mean"] == 4.0 and scalars["episode/wins"] == 1
    assert metrics.totals == EpisodeTotals(3, 1, 1, 1)
    assert metrics.win_rate == 0.0
    restored = EpisodeMetrics(window=2)
    restored.load_state_dict(json.loads(json.dumps(metrics.state_dict())))
    assert restored.totals == metrics.totals and list(restored.recent) == list(metrics.recent)


def test_env_lifecycle_streams_do_not_depend_on_order() -> None:
    a, b = EnvLifecycle(3, seed=1), EnvLifecycle(3, seed=1)
    draws_a = [a[i].rng.integers(100) for i in (0, 1, 2, 0)]
    draws_b = [b[i].rng.integers(100) for i in (2, 1, 0, 0)]
    assert (draws_a[0], draws_a[3]) == (draws_b[2], draws_b[3])
    assert draws_a[1] == draws_b[1] and draws_a[2] == draws_b[0]
    c = EnvLifecycle(3, seed=1)
    c.set_rng_states(json.loads(json.dumps(a.rng_states())))
    assert [s.rng.integers(1000) for s in c.states] == [s.rng.integers(1000) for s in a.states]


def test_env_lifecycle_counts_every_life_lost_in_an_episode() -> None:
    lifecycle = EnvLifecycle(1, seed=1)
    state = lifecycle[0]
    frame = np.zeros((2, 2), np.uint8)
    state.begin_episode(frame, {"lives": 3, "score": 0})
    # A life lost, an extra life won, two lives lost at once: three lost in all.
    for lives in (3, 2, 3, 1):
        lifecycle.on_step(state, StepResult(0, frame, 0.0, False, False, {"lives": lives}), 0.0)
    assert state.lives_lost == 3 and state.last_lives == 1
    state.begin_episode(frame, {"lives": 3, "score": 0})
    assert state.lives_lost == 0
    # A game without lives loses none.
    state.begin_episode(frame, {"lives": None})
    lifecycle.on_step(state, StepResult(0, frame, 0.0, False, False, {"lives": None}), 0.0)
    assert state.lives_lost == 0


def test_actor_runtime_state_round_trip() -> None:
    state = ActorRuntimeState(
        steps=5, totals=EpisodeTotals(1, 1, 0, 0), episode_metrics={"a": 1}, extra={"k": [1]}
    )
    assert ActorRuntimeState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_trajectory_coordinator_keeps_best_and_wins() -> None:
    coordinator = TrajectoryEpisodeCoordinator(keep_best=2, keep_wins=1)
    for env_id, (ret, outcome) in enumerate(
        [(1.0, "loss"), (5.0, "win"), (3.0, "loss"), (4.0, "win")]
    ):
        coordinator.begin_episode(env_id, seed=env_id)
        for t in range(3):
            coordinator.record_step(env_id, t, ret / 3)
        coordinator.end_episode(env_id, outcome=outcome, episode_return=ret, score=ret, step=10)
    assert [r.episode_return for r in coordinator.best] == [5.0, 4.0]
    assert [r.env_id for r in coordinator.wins] == [3]
    assert list(coordinator.best[0].actions) == [0, 1, 2] and coordinator.best[0].seed == 1
    coordinator.record_random_step()
    copy = TrajectoryEpisodeCoordinator(keep_best=2, keep_wins=1)
    copy.load_state_dict(json.loads(json.dumps(coordinator.state_dict())))
    assert copy.state_dict() == coordinator.state_dict()
    assert copy.summary()["random_steps"] == 1 and copy.best_return == 5.0


def test_sinks(tmp_path: Path) -> None:
    memory = MemorySink()
    memory.scalar("a", 1.0, 1)
    memory.scalar("a", 2.0, 2)
    assert memory.get("a") == 2.0 and memory.history["a"] == [(1, 1.0), (2, 2.0)]
    board = TensorBoardSink(tmp_path / "tb")
    board.scalar("episode/return", 1.0, 3)
    board.close()
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    lines: list[str] = []
    console = ConsoleSink(100, interval=0.0, live=False)
    console.scalar("train/epsilon", 0.5, 1)
    console.scalar("episode/return_mean", np.float64(2.0), 1)  # type: ignore[arg-type]
    assert "eps 0.500" in console.headline() and "return 2.00" in console.headline()
    del lines


def test_enter_thread_sets_each_threads_own_torch_thread_count(tmp_path: Path) -> None:
    # The learner asks for 2 threads, the actor for the run's 1. torch sets a thread's
    # count lazily from whichever thread set it last; enter_thread must pin each one.
    context = RuntimeContext(config=None, device=torch.device("cpu"), run_dir=tmp_path)
    context.torch_threads = 1
    counts: dict[str, int] = {}
    learner_ready, actor_done = threading.Event(), threading.Event()

    def learner() -> None:
        context.enter_thread(2)
        learner_ready.set()
        actor_done.wait(10)
        torch.ones(256, 256) @ torch.ones(256, 256)  # first parallel op after the actor's
        counts["learner"] = torch.get_num_threads()

    def actor() -> None:
        learner_ready.wait(10)
        context.enter_thread()
        torch.ones(16) + 1
        counts["actor"] = torch.get_num_threads()
        actor_done.set()

    threads = [threading.Thread(target=learner), threading.Thread(target=actor)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert counts == {"learner": 2, "actor": 1}
