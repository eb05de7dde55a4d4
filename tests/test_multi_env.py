"""OakEmuMultiEnv: results, seeding, buffer lifetime, faults, and no leaks."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from threadpoolctl import threadpool_info

from oakemu_rl.envs import MultiEnvError, OakEmuMultiEnv, StepResult
from oakemu_rl.envs.multi_env import Backend
from oakemu_rl.envs.shared_obs import ObservationSlots, SlotLayout
from oakemu_rl.envs.worker import OP_RESET, OP_STEP, EnvHost

pytestmark = pytest.mark.timeout(60)


class ToyEnv(gym.Env[np.ndarray, np.int64]):
    """A tiny env: obs = [env_id, step, action, seed byte]; knobs for delays and faults."""

    def __init__(
        self,
        env_id: int,
        episode_len: int = 1000,
        step_delay: float = 0.0,
        slow_envs: tuple[int, ...] = (),
        fail_env: int | None = None,
        fail_at: int = 3,
        bad_info: bool = False,
    ) -> None:
        self.env_id = env_id
        self.episode_len = episode_len
        self.step_delay = step_delay if env_id in slow_envs or not slow_envs else 0.0
        self.fail = fail_env == env_id
        self.fail_at = fail_at
        self.bad_info = bad_info
        self.observation_space = spaces.Box(0, 255, shape=(4,), dtype=np.uint8)
        self.action_space = spaces.Discrete(4)
        self.t = 0
        self.seed_byte = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        self.seed_byte = int(self.np_random.integers(256))
        return self._obs(0), {"seed_byte": self.seed_byte}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        if self.fail and self.t >= self.fail_at:
            raise ValueError(f"game bug in env {self.env_id} at step {self.t}")
        if self.step_delay:
            time.sleep(self.step_delay)
        done = self.t >= self.episode_len
        info: dict[str, Any] = {"t": self.t}
        if self.bad_info:
            info["callback"] = lambda: None  # does not pickle
        return self._obs(int(action)), float(action), done, False, info

    def _obs(self, action: int) -> np.ndarray:
        return np.array([self.env_id, self.t % 256, action, self.seed_byte], dtype=np.uint8)


def toy(env_id: int, **kwargs: Any) -> ToyEnv:
    return ToyEnv(env_id, **kwargs)


def toy_factory(**kwargs: Any) -> Any:
    return functools.partial(toy, **kwargs)


def drain(envs: OakEmuMultiEnv, timeout: float = 10.0) -> list[StepResult]:
    results: list[StepResult] = []
    deadline = time.monotonic() + timeout
    while envs.in_flight and time.monotonic() < deadline:
        results.extend(envs.poll(timeout=1.0))
    return results


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before, or while, we read it
        return False


def wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


# -- behaviour ---------------------------------------------------------------------------


def run_episodes(game: str, backend: Backend, auto_reset: bool, steps: int) -> list[str]:
    """Digest of each env's whole stream for per-env random actions."""
    with OakEmuMultiEnv(
        game, num_envs=3, num_workers=2, backend=backend, seed=11, auto_reset=auto_reset
    ) as envs:
        envs.reset_all()
        rngs = [np.random.default_rng(100 + i) for i in range(3)]
        digests = [hashlib.sha256() for _ in range(3)]
        counts = [0, 0, 0]
        while envs.in_flight:
            for r in envs.poll():
                i = r.env_id
                d = digests[i]
                d.update(r.observation.tobytes())
                final = r.info.get("final_observation")
                if final is not None:
                    d.update(final.tobytes())
                d.update(repr((r.reward, r.terminated, r.truncated, r.is_reset)).encode())
                d.update(repr(r.info.get("score")).encode())
                if counts[i] == steps:
                    continue
                counts[i] += 1
                if r.done and not auto_reset:
                    envs.submit_reset(i)
                else:
                    envs.submit(i, int(rngs[i].integers(envs.action_space.n)))
        return [d.hexdigest() for d in digests]


@pytest.mark.parametrize(
    ("game", "steps", "auto_reset"),
    [("catch", 120, False), ("gym:CartPole-v1", 150, False), ("gym:CartPole-v1", 150, True)],
)
def test_inline_and_process_give_identical_results(game: str, steps: int, auto_reset: bool) -> None:
    inline = run_episodes(game, "inline", auto_reset, steps)
    process = run_episodes(game, "process", auto_reset, steps)
    assert inline == process
    assert len(set(inline)) == 3  # the envs got different seeds


def test_seeds_are_base_plus_env_id() -> None:
    with OakEmuMultiEnv(env_factory=toy, num_envs=3, backend="inline", seed=5) as envs:
        envs.reset_all()
        firsts = {r.env_id: r.info["seed_byte"] for r in envs.poll()}
    for i in range(3):
        env = ToyEnv(i)
        env.reset(seed=5 + i)
        assert firsts[i] == env.seed_byte


def test_slow_env_does_not_hold_back_the_others() -> None:
    factory = toy_factory(step_delay=0.4, slow_envs=(0,), episode_len=10**9)
    with OakEmuMultiEnv(env_factory=factory, num_envs=4, num_workers=2) as envs:
        envs.reset_all()
        drain(envs)
        for i in range(4):
            envs.submit(i, 1)
        order: list[int] = []
        start = time.monotonic()
        while 0 not in order:
            for r in envs.poll(timeout=2.0):
                order.append(r.env_id)
                if r.env_id != 0:
                    envs.submit(r.env_id, 1)
        assert time.monotonic() - start < 2.0
        # Env 2 shares worker 0 with the slow env 0; envs 1 and 3 have worker 1.
        assert order.index(0) > 3, order
        assert order.count(1) >= 2 and order.count(3) >= 2, order
        drain(envs)


def test_result_queue_depth_and_max_results() -> None:
    with OakEmuMultiEnv(env_factory=toy, num_envs=4, num_workers=2) as envs:
        envs.reset_all()
        deadline = time.monotonic() + 5
        while envs.result_queue_depth < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert envs.result_queue_depth == 4
        first = envs.poll(max_results=3)
        assert len(first) == 3 and envs.result_queue_depth == 1
        rest = envs.poll()
        assert len(rest) == 1
        assert sorted(r.env_id for r in first + rest) == [0, 1, 2, 3]
        assert all(r.is_reset and r.reward == 0.0 for r in first + rest)
        assert envs.poll(timeout=0) == []
        assert envs.poll() == []  # nothing in flight: returns at once


def test_batch_sends_the_blocks_commands_as_one_message_per_worker() -> None:
    with OakEmuMultiEnv(env_factory=toy, num_envs=4, num_workers=2) as envs:
        envs.reset_all()
        assert len(drain(envs)) == 4
        sent: list[int] = []
        for w in envs._workers:
            conn = w.conn
            assert conn is not None
            original = conn.send
            conn.send = lambda message, original=original: (  # type: ignore[method-assign]
                sent.append(len(message)),
                original(message),
            )
        with envs.batch():
            for env_id in range(4):
                envs.submit(env_id, 1)
            time.sleep(0.05)
            assert sent == [] and envs.result_queue_depth == 0  # held back until the end
        results = drain(envs)
        assert sorted(r.env_id for r in results) == [0, 1, 2, 3]
        assert sent == [2, 2]  # one wake-up of each worker for its two envs
        # Outside a block a worker with fewer than two commands queued gets each at once.
        sent.clear()
        envs.submit(0, 1)
        envs.submit(1, 1)
        assert sent == [1, 1]
        drain(envs)


def test_worker_nice_lowers_the_workers_priority_only() -> None:
    parent = os.getpriority(os.PRIO_PROCESS, 0)
    with OakEmuMultiEnv(env_factory=toy, num_envs=2, num_workers=2, worker_nice=5) as envs:
        envs.reset_all()
        assert len(drain(envs)) == 2  # the workers are serving
        pids = envs.worker_pids
        assert len(pids) == 2
        assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in pids] == [min(19, parent + 5)] * 2
    assert os.getpriority(os.PRIO_PROCESS, 0) == parent  # this process keeps its priority
    with OakEmuMultiEnv(env_factory=toy, num_envs=2, num_workers=2) as envs:  # default: as ours
        envs.reset_all()
        drain(envs)
        assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in envs.worker_pids] == [parent] * 2
    with pytest.raises(ValueError, match="worker_nice must be 0-19 or 'idle', not 20"):
        OakEmuMultiEnv(env_factory=toy, num_envs=2, worker_nice=20)
    with pytest.raises(ValueError, match="worker_nice must be 0-19 or 'idle', not 'low'"):
        OakEmuMultiEnv(env_factory=toy, num_envs=2, worker_nice="low")  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="needs Linux's SCHED_IDLE")
def test_idle_workers_run_in_the_idle_scheduling_class() -> None:
    ours = os.sched_getscheduler(0)
    with OakEmuMultiEnv(env_factory=toy, num_envs=2, num_workers=2, worker_nice="idle") as envs:
        envs.reset_all()
        assert len(drain(envs)) == 2  # idle workers still serve on a machine with idle cores
        assert [os.sched_getscheduler(pid) for pid in envs.worker_pids] == [os.SCHED_IDLE] * 2
    assert os.sched_getscheduler(0) == ours == os.SCHED_OTHER  # this process keeps its class


@pytest.mark.parametrize("backend", ["inline", "process"])
def test_observation_stays_valid_until_the_second_submit(backend: Backend) -> None:
    with OakEmuMultiEnv(env_factory=toy, num_envs=2, num_workers=2, backend=backend) as envs:
        envs.reset_all()
        drain(envs)
        envs.submit(0, 1)
        (first,) = drain(envs)
        kept = first.observation.copy()
        assert not first.observation.flags.writeable
        envs.submit(0, 2)  # the actor may still read `first` ...
        (second,) = drain(envs)
        np.testing.assert_array_equal(first.observation, kept)  # ... after the next result too
        assert list(second.observation[:3]) == [0, 2, 2]
        assert not np.shares_memory(first.observation, second.observation)


def test_episode_end_waits_for_reset() -> None:
    with OakEmuMultiEnv(env_factory=toy_factory(episode_len=2), num_envs=1, num_workers=1) as envs:
        with pytest.raises(RuntimeError, match="submit_reset"):
            envs.submit(0, 1)
        envs.submit_reset(0)
        with pytest.raises(RuntimeError, match="in flight"):
            envs.submit(0, 1)
        drain(envs)
        envs.submit(0, 1)
        drain(envs)
        envs.submit(0, 3)
        (last,) = drain(envs)
        assert last.terminated and last.done
        with pytest.raises(RuntimeError, match="submit_reset"):
            envs.submit(0, 1)
        envs.submit_reset(0)
        (reset,) = drain(envs)
        assert reset.is_reset and list(reset.observation[:2]) == [0, 0]


@pytest.mark.parametrize("backend", ["inline", "process"])
def test_auto_reset_puts_the_final_observation_in_info(backend: Backend) -> None:
    factory = toy_factory(episode_len=2)
    with OakEmuMultiEnv(
        env_factory=factory, num_envs=2, num_workers=2, backend=backend, auto_reset=True
    ) as envs:
        envs.reset_all()
        drain(envs)
        for action in (1, 3, 2):
            envs.submit(1, action)
            (r,) = drain(envs)
        # The third step is the first of a new episode.
        assert list(r.observation[:3]) == [1, 1, 2] and not r.done
        envs.submit(1, 1)
        (r,) = drain(envs)
        assert r.terminated
        assert list(r.info["final_observation"][:3]) == [1, 2, 1]
        assert r.info["final_info"] == {"t": 2}
        assert list(r.observation[:2]) == [1, 0]  # the next episode's first observation


def test_save_state_and_reset_from_it() -> None:
    with OakEmuMultiEnv("catch", num_envs=2, num_workers=2, seed=3) as envs:
        envs.reset_all()
        drain(envs)
        for _ in range(5):
            envs.submit(0, 1)
            drain(envs)
        state = envs.save_state(0)
        assert isinstance(state, bytes) and len(state) > 48 * 1024
        envs.submit(0, 2)
        (expected,) = drain(envs)
        expected_obs = expected.observation.copy()
        envs.submit_reset(1, state=state)
        drain(envs)
        envs.submit(1, 2)
        (replayed,) = drain(envs)
        # The frame stack is rebuilt on reset, so compare the newest frame.
        np.testing.assert_array_equal(replayed.observation[-1], expected_obs[-1])
        assert replayed.reward == expected.reward


def test_spaces_and_repr() -> None:
    with OakEmuMultiEnv("gym:CartPole-v1", num_envs=2, backend="inline") as envs:
        assert envs.num_envs == 2
        assert envs.observation_space.shape == (4,)
        assert envs.action_space.n == 2
        assert "num_envs=2" in repr(envs)
    assert envs.closed
    with pytest.raises(RuntimeError, match="closed"):
        envs.submit_reset(0)


# -- faults -----------------------------------------------------------------------------


def test_killed_worker_is_reported_within_a_second() -> None:
    factory = toy_factory(step_delay=0.05)
    with OakEmuMultiEnv(env_factory=factory, num_envs=4, num_workers=2) as envs:
        envs.reset_all()
        drain(envs)
        victim = envs.worker_pids[1]
        for i in range(4):
            envs.submit(i, 1)
        os.kill(victim, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(MultiEnvError) as info:
            while True:
                for r in envs.poll(timeout=5.0):
                    envs.submit(r.env_id, 1)
        assert time.monotonic() - start < 1.0
        error = info.value
        assert error.env_ids == (1, 3) and error.worker_index == 1
        assert "envs 1, 3" in str(error) and "SIGKILL" in str(error)
        with pytest.raises(MultiEnvError):  # stays failed
            envs.poll()
        pids = envs.worker_pids
    assert wait_gone(pids) == []


def test_exception_in_a_game_carries_the_worker_traceback() -> None:
    factory = toy_factory(fail_env=2, fail_at=2)
    with OakEmuMultiEnv(env_factory=factory, num_envs=4, num_workers=2) as envs:
        envs.reset_all()
        drain(envs)
        with pytest.raises(MultiEnvError) as info:
            for _ in range(5):
                for i in range(4):
                    envs.submit(i, 1)
                drain(envs)
    error = info.value
    assert 2 in error.env_ids and error.worker_index == 0
    assert error.worker_traceback is not None
    assert "ValueError: game bug in env 2 at step 2" in error.worker_traceback
    assert "env 2 raised in step" in str(error) and "game bug" in str(error)


def test_exception_inline_names_the_env() -> None:
    factory = toy_factory(fail_env=1, fail_at=1)
    with OakEmuMultiEnv(env_factory=factory, num_envs=2, backend="inline") as envs:
        envs.reset_all()
        envs.poll()
        envs.submit(1, 0)
        with pytest.raises(MultiEnvError, match="env 1 raised in step") as info:
            envs.poll()
    assert info.value.env_ids == (1,)


def test_an_info_that_does_not_pickle_is_a_clear_fault() -> None:
    with OakEmuMultiEnv(env_factory=toy_factory(bad_info=True), num_envs=1) as envs:
        envs.submit_reset(0)
        drain(envs)
        envs.submit(0, 1)
        with pytest.raises(MultiEnvError, match="raised in the worker loop") as info:
            drain(envs)
    assert info.value.worker_traceback and "pickle" in info.value.worker_traceback


def bad_factory(env_id: int) -> ToyEnv:
    if env_id == 1:
        raise OSError("no such game file")
    return ToyEnv(env_id)


def test_a_worker_that_cannot_build_its_env_fails_the_constructor() -> None:
    with pytest.raises(MultiEnvError, match="no such game file") as info:
        OakEmuMultiEnv(env_factory=bad_factory, num_envs=2, num_workers=2)
    assert info.value.env_ids == (1,)


@pytest.mark.parametrize("auto_reset", [False, True])
def test_restart_workers_reports_lost_episodes_as_truncated(auto_reset: bool) -> None:
    factory = toy_factory(step_delay=0.05, slow_envs=(1,))
    with OakEmuMultiEnv(
        env_factory=factory,
        num_envs=4,
        num_workers=2,
        restart_workers=True,
        auto_reset=auto_reset,
    ) as envs:
        envs.reset_all()
        drain(envs)
        old = envs.worker_pids[1]
        envs.submit(0, 1)
        envs.submit(1, 1)  # slow: in flight when the worker dies
        os.kill(old, signal.SIGKILL)  # env 3 (same worker) is idle
        results = {r.env_id: r for r in drain(envs)}
        assert set(results) == {0, 1}
        lost = results[1]
        assert lost.truncated and not lost.terminated and lost.reward == 0.0
        info = lost.info["final_info"] if auto_reset else lost.info
        assert info["worker_lost"] and "SIGKILL" in info["error"]
        assert "seed_byte" in info  # the last info of the env, marked
        assert envs.worker_pids[1] != old and alive(envs.worker_pids[1])
        # Env 3 was idle: its loss is reported at its next submit.
        envs.submit(3, 1)
        (r3,) = drain(envs)
        assert r3.env_id == 3 and r3.truncated
        for i in (1, 3):
            if not auto_reset:
                envs.submit_reset(i)
        drain(envs)
        envs.submit(1, 2)
        envs.submit(3, 2)
        later = {r.env_id: r for r in drain(envs)}
        assert list(later[3].observation[:3]) == [3, 1, 2] and not later[3].done
    assert not alive(old)


def test_a_replacement_that_cannot_start_is_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Starting a replacement worker can fail outright: a signal to the whole process group
    # (a user's Ctrl-C or SIGTERM) also ends multiprocessing's fork server, which then
    # dies before it answers (EOFError); or the process is out of file descriptors
    # (OSError). The pool must wait and try again, within its restart budget, not fail the
    # run. Here every file descriptor the process may have is taken while the worker dies.
    caplog.set_level("WARNING", logger="oakemu_rl.envs.multi_env")
    with OakEmuMultiEnv(
        env_factory=toy,
        num_envs=2,
        num_workers=2,
        restart_workers=True,
        restart_backoff=0.2,
    ) as envs:
        envs.reset_all()
        drain(envs)
        old = envs.worker_pids[1]
        envs.submit(0, 1)
        drain(envs)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
        fillers = []  # every free descriptor number below the limit, taken
        with contextlib.suppress(OSError):
            while True:
                fillers.append(os.open(os.devnull, os.O_RDONLY))
        try:
            os.kill(old, signal.SIGKILL)
            envs.submit(1, 1)
            deadline = time.monotonic() + 10
            lost: list[StepResult] = []
            while not lost and time.monotonic() < deadline:
                lost = envs.poll(timeout=0.05)
        finally:
            for fd in fillers:
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert lost and lost[0].env_id == 1 and lost[0].info["worker_lost"]
        failed = [
            r.getMessage() for r in caplog.records if "could not be started" in r.getMessage()
        ]
        assert (
            failed and "Too many open files" in failed[0] and "restarting it in 0.2 s" in failed[0]
        )
        envs.submit_reset(1)  # waits for the replacement, which starts after its backoff
        (reset,) = drain(envs)
        assert reset.env_id == 1 and envs.worker_restarts >= 2  # the death, a failed start
        assert envs.worker_pids[1] != old and alive(envs.worker_pids[1])
        envs.submit(1, 2)
        envs.submit(0, 2)
        assert {r.env_id for r in drain(envs)} == {0, 1}  # both workers answer again


class BrokenResetEnv(ToyEnv):
    """Raises on every reset, like a game whose start procedure no longer works."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        raise RuntimeError("the start procedure never reaches the game")


def broken_reset(env_id: int) -> ToyEnv:
    return BrokenResetEnv(env_id)


def test_a_restart_storm_backs_off_logs_the_traceback_once_and_ends_at_the_cap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="oakemu_rl.envs.multi_env")
    with OakEmuMultiEnv(
        env_factory=broken_reset,
        num_envs=1,
        num_workers=1,
        restart_workers=True,
        max_restarts_per_minute=5,
        restart_backoff=0.05,
    ) as envs:
        start = time.monotonic()
        envs.submit_reset(0)
        with pytest.raises(MultiEnvError, match="no more restarts: 5 restarts in the last minute"):
            drain(envs, timeout=30)
        elapsed = time.monotonic() - start
        assert envs.worker_restarts == 5
        # Each death after the first without an answer in between waits longer:
        # 0 + 0.05 + 0.1 + 0.2 + 0.4 s before the five restarts.
        assert elapsed >= 0.75
        with pytest.raises(MultiEnvError, match="start procedure never reaches"):
            envs.poll()  # the failure stays
    records = [r for r in caplog.records if "restarting it" in r.getMessage()]
    assert len(records) == 5
    with_traceback = [r for r in records if "Traceback" in r.getMessage()]
    assert len(with_traceback) == 1


def test_a_stopped_worker_is_killed_after_worker_timeout_and_its_episode_truncated() -> None:
    with OakEmuMultiEnv(
        env_factory=toy,
        num_envs=2,
        num_workers=2,
        restart_workers=True,
        worker_timeout=1.0,
    ) as envs:
        envs.reset_all()
        drain(envs)
        stopped = envs.worker_pids[1]
        os.kill(stopped, signal.SIGSTOP)
        try:
            envs.submit(0, 1)
            envs.submit(1, 1)
            results = {r.env_id: r for r in drain(envs, timeout=15)}
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
        assert not results[0].done
        lost = results[1]
        assert lost.truncated and lost.info["worker_lost"]
        assert "did not answer within 1 s" in lost.info["error"]
        assert envs.worker_restarts == 1
        assert envs.worker_pids[1] != stopped
        assert wait_gone([stopped], 3.0) == []
        envs.submit_reset(1)
        envs.submit(0, 2)
        assert {r.env_id for r in drain(envs)} == {0, 1}


def test_a_stopped_worker_without_restarts_is_a_clear_error() -> None:
    with OakEmuMultiEnv(env_factory=toy, num_envs=1, num_workers=1, worker_timeout=0.5) as envs:
        envs.submit_reset(0)
        drain(envs)
        pid = envs.worker_pids[0]
        os.kill(pid, signal.SIGSTOP)
        envs.submit(0, 1)
        with pytest.raises(MultiEnvError, match=r"did not answer within 0\.5 s and was killed"):
            drain(envs, timeout=10)


# -- no leaks ---------------------------------------------------------------------------


def test_close_leaves_no_processes_and_is_idempotent() -> None:
    envs = OakEmuMultiEnv(env_factory=toy, num_envs=3, num_workers=2, shared_memory="posix")
    pids, name = envs.worker_pids, envs.shared_memory_name
    assert name is not None and os.path.exists(f"/dev/shm/{name}")
    envs.reset_all()
    drain(envs)
    start = time.monotonic()
    envs.close()
    envs.close()
    assert time.monotonic() - start < 3.0
    assert wait_gone(pids, 2.0) == []
    assert not os.path.exists(f"/dev/shm/{name}")


def test_close_does_not_hang_on_a_stuck_worker() -> None:
    envs = OakEmuMultiEnv(env_factory=toy_factory(step_delay=30.0), num_envs=1, num_workers=1)
    envs.submit_reset(0)
    drain(envs)
    envs.submit(0, 1)  # sleeps for 30 s
    pids = envs.worker_pids
    time.sleep(0.1)
    start = time.monotonic()
    envs.close()
    assert time.monotonic() - start < 3.0
    assert wait_gone(pids, 2.0) == []


PARENT_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, {tests!r})
    from oakemu_rl.envs import OakEmuMultiEnv
    from test_multi_env import toy

    if __name__ == "__main__":
        envs = OakEmuMultiEnv(env_factory=toy, num_envs=4, num_workers=2,
                              shared_memory={kind!r}, auto_reset=True)
        envs.reset_all()
        print(json.dumps({{"pids": envs.worker_pids, "shm": envs.shared_memory_name}}),
              flush=True)
        while True:
            for r in envs.poll():
                envs.submit(r.env_id, 1)
    """
)


@pytest.mark.parametrize("kind", ["memfd", "posix"])
def test_killed_parent_leaves_no_workers_and_no_shared_memory(kind: str, tmp_path: Path) -> None:
    if kind == "memfd" and not hasattr(os, "memfd_create"):
        pytest.skip("no memfd on this platform")
    script = tmp_path / "parent.py"
    script.write_text(PARENT_SCRIPT.format(tests=str(Path(__file__).parent), kind=kind))
    before = set(os.listdir("/dev/shm"))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        time.sleep(0.3)  # let it step
        assert all(alive(p) for p in info["pids"])
        proc.kill()
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert wait_gone(info["pids"], 5.0) == []
    if kind == "posix":
        name = info["shm"]
        deadline = time.monotonic() + 5
        while os.path.exists(f"/dev/shm/{name}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(f"/dev/shm/{name}")
    else:
        assert info["shm"] is None
    leaked = {n for n in set(os.listdir("/dev/shm")) - before if "oakemu" in n}
    assert leaked == set()


def test_copy_observations_gives_private_arrays() -> None:
    with OakEmuMultiEnv(
        env_factory=toy, num_envs=1, backend="inline", copy_observations=True
    ) as envs:
        envs.submit_reset(0)
        (r,) = envs.poll()
        assert r.observation.flags.writeable and r.observation.flags.owndata


def test_messages_hold_no_arrays() -> None:
    layout = SlotLayout(num_envs=2, shape=(4,), dtype="|u1")
    slots = ObservationSlots.create(layout, "local")
    host = EnvHost(toy_factory(episode_len=1), {0: 1, 1: 2}, slots, auto_reset=True)
    results = [
        host.execute((OP_RESET, 0, 0, (None, None))),
        host.execute((OP_STEP, 0, 1, 3)),  # ends the episode: auto-reset
    ]
    assert results[1][2] == 2  # two slots written: final and first observation
    assert list(slots.views[0][1][:3]) == [0, 1, 3] and list(slots.views[0][2][:2]) == [0, 0]

    def arrays(value: Any) -> bool:
        if isinstance(value, np.ndarray):
            return True
        if isinstance(value, dict):
            return any(arrays(v) for v in value.values())
        if isinstance(value, (tuple, list)):
            return any(arrays(v) for v in value)
        return False

    assert not arrays(results)
    host.close()
    slots.close()


def test_slots_layout_and_views() -> None:
    layout = SlotLayout(num_envs=2, shape=(3, 5), dtype="|u1")
    slots = ObservationSlots.create(layout, "local")
    assert layout.stride == 64 and layout.total_bytes == 2 * 3 * 64
    slots.views[1][2][...] = 7
    assert slots.read_views[1][2].sum() == 7 * 15 and slots.read_views[1][1].sum() == 0
    assert not slots.read_views[0][0].flags.writeable
    slots.close()
    slots.close()


def blas_threads() -> list[int]:
    """How many threads each BLAS loaded in this process would use for a matrix product."""
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


class BlasEnv(ToyEnv):
    """A ToyEnv that reports `blas_threads()` of its process (numpy code in a game's
    wrapper may make a matrix product)."""

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, done, truncated, info = super().step(action)
        info["blas_threads"] = blas_threads()
        return obs, reward, done, truncated, info


@pytest.mark.skipif(
    all(threads == 1 for threads in blas_threads()),
    reason="numpy's BLAS runs one thread here anyway (one core, or OPENBLAS_NUM_THREADS=1)",
)
def test_workers_run_numpy_on_one_thread() -> None:
    """Workers share the cores among themselves; a BLAS pool in each would oversubscribe
    them (OpenBLAS reads its thread count when numpy loads, before a worker starts)."""
    with OakEmuMultiEnv(env_factory=BlasEnv, num_envs=2, num_workers=2) as envs:
        envs.reset_all()
        drain(envs)
        envs.submit(0, 0)
        envs.submit(1, 0)
        results = drain(envs)
    assert [r.info["blas_threads"] for r in results] == [[1], [1]]
