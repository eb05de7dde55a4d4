"""RolloutHandshake under concurrency: hand-offs, and stopping never deadlocks."""

from __future__ import annotations

import threading
import time

import pytest

from oakemu_rl.ppo.handshake import RolloutHandshake

TIMEOUT = 5.0


def _thread(target: object) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_rollouts_go_back_and_forth() -> None:
    handshake = RolloutHandshake()
    trained: list[int] = []
    log: list[str] = []

    def learner() -> None:
        while handshake.wait_for_rollout():
            log.append("train")
            time.sleep(0.005)
            trained.append(handshake.rollouts)
            handshake.release()

    thread = _thread(learner)
    for i in range(5):
        log.append("fill")
        assert handshake.submit_and_wait(TIMEOUT)
        assert not handshake.training
        assert trained[-1] == i + 1
    handshake.stop()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert log == ["fill", "train"] * 5


def test_stop_during_fill_frees_the_waiting_learner() -> None:
    handshake = RolloutHandshake()
    outcome: list[bool] = []
    learner = _thread(lambda: outcome.append(handshake.wait_for_rollout()))
    time.sleep(0.1)  # the actor is "filling": nothing has been signalled
    assert learner.is_alive()
    start = time.monotonic()
    handshake.stop()
    learner.join(TIMEOUT)
    assert not learner.is_alive() and outcome == [False]
    assert time.monotonic() - start < 1.0
    # Later waits on either side return at once.
    assert handshake.wait_for_rollout() is False
    assert handshake.wait_for_release() is False


def test_stop_during_training_frees_the_waiting_actor() -> None:
    handshake = RolloutHandshake()
    training = threading.Event()
    finish = threading.Event()
    learner_done: list[bool] = []

    def learner() -> None:
        assert handshake.wait_for_rollout()
        training.set()
        finish.wait(TIMEOUT)  # a long training phase
        handshake.release()  # after the stop: harmless
        learner_done.append(handshake.wait_for_rollout())

    thread = _thread(learner)
    actor_result: list[bool] = []
    actor = _thread(lambda: actor_result.append(handshake.submit_and_wait()))
    assert training.wait(TIMEOUT)
    time.sleep(0.05)
    assert actor.is_alive()  # waiting for the release
    handshake.stop()
    actor.join(TIMEOUT)
    assert not actor.is_alive() and actor_result == [False]
    finish.set()
    thread.join(TIMEOUT)
    assert not thread.is_alive() and learner_done == [False]


def test_the_run_stop_event_stops_the_handshake() -> None:
    stop = threading.Event()
    handshake = RolloutHandshake(stop, poll_interval=0.01)
    result: list[bool] = []
    actor = _thread(lambda: result.append(handshake.submit_and_wait()))
    time.sleep(0.05)
    stop.set()
    actor.join(TIMEOUT)
    assert result == [False] and handshake.stopped


def test_timeouts_and_misuse() -> None:
    handshake = RolloutHandshake()
    assert handshake.wait_for_rollout(timeout=0.05) is False
    handshake.signal_full()
    with pytest.raises(RuntimeError, match="not been released"):
        handshake.signal_full()
    assert handshake.wait_for_release(timeout=0.05) is False
    assert handshake.wait_for_rollout(timeout=0.05) is True
    handshake.release()
    assert handshake.wait_for_release(timeout=0.05) is True


def test_the_learner_sees_the_rollout_handed_over_and_releases_are_counted() -> None:
    handshake = RolloutHandshake()
    seen: list[object] = []

    def learner() -> None:
        while handshake.wait_for_rollout():
            seen.append(handshake.rollout)
            handshake.release()

    thread = _thread(learner)
    first, second = object(), object()
    handshake.signal_full(first)  # overlapping collection: the actor does not wait here
    assert handshake.wait_for_release(TIMEOUT)
    assert handshake.submit_and_wait(TIMEOUT, rollout=second)
    assert handshake.submit_and_wait(TIMEOUT)  # the learner's own buffer
    assert seen == [first, second, None]
    assert handshake.releases == handshake.rollouts == 3
    handshake.stop()
    thread.join(TIMEOUT)
