"""What every backend of OakEmuMultiEnv shares: the per-env records, the result stream,
the lost-episode reports (`EnvPool`), and for backends with workers the batching of
commands, the timers and the restart policy (`WorkerPool`).

A backend consumes commands ``(op, env_id, slot, arg)`` (see `worker`) and produces
result tuples; the pool turns them into `StepResult`s whose observations are read-only
views of its slots (`shared_obs`). A new backend is a subclass of `EnvPool` (envs in
this process) or `WorkerPool` (envs hosted by workers) that delivers commands and takes
in what comes back.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..shared_obs import SLOTS_PER_ENV, ObservationSlots, SlotKind, SlotLayout
from ..worker import OP_RESET, OP_SAVE, OP_STEP, Command, EnvFactory, WorkerPriority

__all__ = [
    "EnvPool",
    "EnvRecord",
    "MultiEnvError",
    "PoolSettings",
    "Resources",
    "StepResult",
    "WorkerPool",
    "WorkerRecord",
]

log = logging.getLogger("oakemu_rl.envs.multi_env")

IDLE, STEPPING, RESETTING, SAVING = 0, 1, 2, 3
# The longest wait before restarting a worker that keeps dying: short enough that
# `max_restarts_per_minute` deaths in a row fall within a minute and end the restarts.
MAX_BACKOFF_S = 5.0


@dataclass(slots=True)
class StepResult:
    """One finished command of one env: a step, or a reset (``is_reset``).

    ``observation`` is a read-only view into memory owned by the multi-env; see the
    `multi_env` module docstring for how long it stays valid. A reset result has
    reward 0 and is neither terminated nor truncated.
    """

    env_id: int
    observation: npt.NDArray[Any]
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    is_reset: bool = False

    @property
    def done(self) -> bool:
        """The episode ended (terminated or truncated)."""
        return self.terminated or self.truncated


class MultiEnvError(RuntimeError):
    """A worker died or an env raised: which worker, which envs, and the traceback."""

    def __init__(
        self,
        message: str,
        env_ids: Sequence[int] = (),
        worker_index: int | None = None,
        worker_traceback: str | None = None,
        exitcode: int | None = None,
    ) -> None:
        super().__init__(message)
        self.env_ids = tuple(env_ids)
        self.worker_index = worker_index
        self.worker_traceback = worker_traceback
        self.exitcode = exitcode


@dataclass(frozen=True)
class PoolSettings:
    """What OakEmuMultiEnv was asked for, handed to its backend (see its docstring)."""

    factory: EnvFactory
    layout: SlotLayout
    seed: int | None
    auto_reset: bool
    num_workers: int | None = None
    restart_workers: bool = False
    max_restarts_per_minute: int = 10
    restart_backoff: float = 0.5
    worker_timeout: float | None = None
    batch_latency: float = 0.0002
    startup_timeout: float = 120.0
    worker_nice: WorkerPriority = 0
    start_method: str | None = None
    shared_memory: SlotKind | None = None
    game: str | Path | None = None
    observation_config: Any = None
    env_wrapper: Any = None
    ray_address: str | None = None

    @property
    def num_envs(self) -> int:
        return self.layout.num_envs

    def first_seeds(self, env_ids: Sequence[int], generation: int) -> dict[int, int | None]:
        """The seeds of the first resets of `env_ids` on a worker of that generation."""
        if self.seed is None:
            return dict.fromkeys(env_ids)
        if generation == 0:
            return {i: self.seed + i for i in env_ids}
        # A restarted worker's envs must not replay the episodes of the first one.
        return {
            i: int(np.random.SeedSequence([self.seed, i, generation]).generate_state(1)[0])
            for i in env_ids
        }


@dataclass(slots=True)
class EnvRecord:
    """What the pool knows of one env."""

    worker: int
    state: int = IDLE
    needs_reset: bool = True
    next_slot: int = 0  # the slot its next command writes
    obs_slot: int = -1  # the slot of its latest observation
    reset_args: tuple[int | None, bytes | None] = (None, None)
    lost: str | None = None  # its episode was lost with a worker, not yet told
    lost_reset: bool = False  # the reset in flight stands for a lost step
    last_info: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class WorkerRecord:
    """One worker, or the record of one waiting to be started."""

    index: int
    env_ids: list[int]
    generation: int
    load: int = 0  # commands sent and not answered
    pending: list[Command] = field(default_factory=list)
    streak: int = 0  # deaths in a row with no answer in between
    start_at: float = 0.0  # when a replacement starts (after its backoff)
    busy_since: float = 0.0  # when its load last rose from 0
    last_heard: float = 0.0  # when it last sent a message
    hung: bool = False  # killed for not answering within worker_timeout


class Resources:
    """What must be released even when the multi-env is never closed: its slots, and the
    workers, stopped by `stop_workers` (a plain function, so that releasing needs no
    reference to the pool)."""

    def __init__(self) -> None:
        self.workers: list[Any] = []
        self.slots: ObservationSlots | None = None
        self.stop_workers: Callable[[list[Any]], None] | None = None
        self.on_release: list[Callable[[], None]] = []
        self.closed = False

    def release(self) -> None:
        if self.closed:
            return
        self.closed = True
        for release in self.on_release:
            release()
        if self.stop_workers is not None:
            self.stop_workers(self.workers)
        if self.slots is not None:
            self.slots.close()


class EnvPool:
    """The envs of one OakEmuMultiEnv: one `EnvRecord` each, one stream of results.

    Consumes submits and resets, produces `StepResult`s in the order results come in.
    Subclasses deliver commands (`_send`), take in results (`_collect`, calling
    `_on_result` for each) and save states (`_save`).
    """

    def __init__(self, settings: PoolSettings, resources: Resources, slot_kind: SlotKind) -> None:
        self.settings = settings
        self.res = resources
        self.auto_reset = settings.auto_reset
        self.num_envs = settings.num_envs
        self.num_workers = 1
        self.envs = [EnvRecord(0) for _ in range(self.num_envs)]
        self.holding = 0  # `batch` blocks open: commands wait for the end of the block
        self.ready: deque[StepResult] = deque()
        self.failure: MultiEnvError | None = None
        self.restarts = 0
        self._in_flight = 0
        self._saved: dict[int, bytes] = {}
        self._save_error: dict[int, MultiEnvError] = {}
        self._lost_reasons: dict[int, str] = {}
        resources.slots = ObservationSlots.create(settings.layout, slot_kind)
        self.slots = resources.slots
        self.views = resources.slots.read_views

    # -- what a backend provides ------------------------------------------------------

    def _send(self, env_id: int, command: Command) -> None:
        raise NotImplementedError

    def _collect(self, max_results: int | None, timeout: float | None) -> None:
        """Take in results until `max_results` are ready, or one is, within `timeout`."""
        raise NotImplementedError

    def _save(self, env_id: int) -> bytes:
        raise NotImplementedError

    def flush(self) -> None:
        """Send submitted commands that are still held back."""

    @property
    def result_queue_depth(self) -> int:
        return len(self.ready)

    @property
    def worker_pids(self) -> list[int]:
        return []

    # -- the public operations ------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return self._in_flight + len(self.ready)

    def submit(self, env_id: int, action: Any) -> None:
        self.check_usable()
        record = self._idle_record(env_id)
        if record.lost is not None:
            self._report_lost(env_id)
            return
        if record.needs_reset:
            raise RuntimeError(
                f"env {env_id} has no running episode (it has not been reset, or its "
                "episode ended): call submit_reset first"
            )
        if isinstance(action, np.integer):
            action = int(action)
        self._set_state(record, STEPPING)
        self._send(env_id, (OP_STEP, env_id, record.next_slot, action))

    def submit_reset(self, env_id: int, state: bytes | None, seed: int | None) -> None:
        self.check_usable()
        record = self._idle_record(env_id)
        record.lost = None
        self._set_state(record, RESETTING)
        record.reset_args = (seed, state)
        self._send(env_id, (OP_RESET, env_id, record.next_slot, (seed, state)))

    def poll(self, max_results: int | None, timeout: float | None) -> list[StepResult]:
        self.check_usable()
        self._collect(max_results, timeout)
        ready = self.ready
        if max_results is None or max_results >= len(ready):
            results = list(ready)
            ready.clear()
            return results
        return [ready.popleft() for _ in range(max_results)]

    def save_state(self, env_id: int) -> bytes:
        self.check_usable()
        if self._idle_record(env_id).lost is not None:
            raise MultiEnvError(f"env {env_id} was lost with its worker; reset it first", [env_id])
        return self._save(env_id)

    def close(self) -> None:
        self.res.release()

    @property
    def closed(self) -> bool:
        return self.res.closed

    def check_usable(self) -> None:
        if self.res.closed:
            raise RuntimeError("this OakEmuMultiEnv is closed")
        if self.failure is not None:
            raise self.failure

    def _idle_record(self, env_id: int) -> EnvRecord:
        if not 0 <= env_id < self.num_envs:
            raise IndexError(f"env_id {env_id} is outside 0..{self.num_envs - 1}")
        record = self.envs[env_id]
        if record.state != IDLE:
            raise RuntimeError(
                f"env {env_id} already has a command in flight; poll its result first"
            )
        return record

    # -- results ---------------------------------------------------------------------

    def _set_state(self, record: EnvRecord, state: int) -> None:
        self._in_flight += (state != IDLE) - (record.state != IDLE)
        record.state = state

    def _has_result(self) -> bool:
        return bool(self.ready) or not self._in_flight

    def _on_result(self, result: tuple[Any, ...]) -> None:
        env_id, is_reset, used, reward, terminated, truncated, info = result
        record = self.envs[env_id]
        slot = record.next_slot
        views = self.views[env_id]
        obs_slot = (slot + used - 1) % SLOTS_PER_ENV
        record.next_slot = (slot + used) % SLOTS_PER_ENV
        if used == 2:
            info["final_observation"] = views[slot]
        self._set_state(record, IDLE)
        if record.lost_reset:
            # The reset of a new worker's env stands for the step that was lost.
            record.lost_reset = False
            last = record.obs_slot
            info["final_observation"] = views[last if last >= 0 else obs_slot]
            info["final_info"] = self._lost_info(record, self._lost_reasons.pop(env_id, ""))
            record.obs_slot = obs_slot
            record.last_info = info
            record.needs_reset = False
            self.ready.append(StepResult(env_id, views[obs_slot], 0.0, False, True, info))
            return
        record.obs_slot = obs_slot
        record.last_info = info
        record.needs_reset = (terminated or truncated) and not self.auto_reset
        self.ready.append(
            StepResult(env_id, views[obs_slot], reward, terminated, truncated, info, is_reset)
        )

    def _on_saved(self, env_id: int, state: bytes) -> None:
        self._set_state(self.envs[env_id], IDLE)
        self._saved[env_id] = state

    # -- episodes lost with a worker --------------------------------------------------------

    def _lost_info(self, record: EnvRecord, reason: str) -> dict[str, Any]:
        """The info of the last step, marked as a truncation by a lost worker."""
        info = {
            k: v
            for k, v in record.last_info.items()
            if k not in ("final_observation", "final_info")
        }
        info.update(outcome="truncated", worker_lost=True, error=reason or "its worker was lost")
        return info

    def _report_lost(self, env_id: int) -> None:
        """The episode of env_id was lost with its worker: report it truncated."""
        record = self.envs[env_id]
        reason = record.lost or "its worker was lost"
        record.lost = None
        if self.auto_reset:
            # The new worker resets the env; that result is shaped as the truncated step.
            self._lost_reasons[env_id] = reason
            self._set_state(record, RESETTING)
            record.lost_reset = True
            record.reset_args = (None, None)
            self._send(env_id, (OP_RESET, env_id, record.next_slot, (None, None)))
            return
        last = record.obs_slot
        obs = self.views[env_id][last if last >= 0 else record.next_slot]
        record.needs_reset = True
        info = self._lost_info(record, reason)
        self.ready.append(StepResult(env_id, obs, 0.0, False, True, info))


class WorkerPool(EnvPool):
    """Envs hosted by workers (`WorkerRecord`), `num_envs` spread over them round-robin.

    Commands for a worker are held and sent together when it has work queued; a worker
    that dies is replaced (`restart_workers`) under a rate limit and a backoff, and the
    episodes it held are reported truncated. Subclasses start workers (`_start`),
    deliver commands (`_transmit`), wait for and take in what they send (`_take_in`),
    and kill a worker that hangs (`_kill_hung`).
    """

    def __init__(
        self, settings: PoolSettings, resources: Resources, slot_kind: SlotKind, num_workers: int
    ) -> None:
        super().__init__(settings, resources, slot_kind)
        self.num_workers = max(1, min(num_workers, self.num_envs))
        for env_id, record in enumerate(self.envs):
            record.worker = env_id % self.num_workers
        self.workers: list[Any] = resources.workers
        self._restart_times: deque[float] = deque()
        self._logged_faults: set[str] = set()
        self._next_timer_check = 0.0

    def _new_worker(self, index: int, generation: int, streak: int, start_at: float) -> Any:
        """The record of worker `index` (a `WorkerRecord` subclass), not started yet."""
        env_ids = list(range(index, self.num_envs, self.num_workers))
        return WorkerRecord(index, env_ids, generation, streak=streak, start_at=start_at)

    # -- what a worker backend provides ---------------------------------------------------

    def _start(self, w: Any) -> None:
        raise NotImplementedError

    def _running(self, w: Any) -> bool:
        raise NotImplementedError

    def _transmit(self, w: Any, commands: list[Command]) -> None:
        raise NotImplementedError

    def _take_in(self, wait: float | None) -> None:
        """Wait up to `wait` s (None: no limit, 0: not at all) for messages; take in all."""
        raise NotImplementedError

    def _kill_hung(self, w: Any) -> None:
        raise NotImplementedError

    # -- sending -------------------------------------------------------------------

    def _send(self, env_id: int, command: Command) -> None:
        w = self.workers[self.envs[env_id].worker]
        w.pending.append(command)
        # A worker with fewer than two commands could run dry: it gets the command
        # at once. One with more has work queued, so the command waits for the
        # next poll or flush, which sends all that was submitted in between as one
        # message: one wake-up of the worker instead of several.
        if w.load < 2 and not self.holding:
            self._flush_worker(w)

    def flush(self) -> None:
        for w in self.workers:
            if w.pending:
                self._flush_worker(w)

    def _flush_worker(self, w: Any) -> None:
        if not w.pending or not self._running(w):
            return  # a worker waiting for its restart keeps its commands until it starts
        commands, w.pending = w.pending, []
        if not w.load:
            w.busy_since = now = time.monotonic()
            if self.settings.worker_timeout is not None:
                # Its answer is due by then: make sure the timers look at it.
                self._next_timer_check = min(
                    self._next_timer_check, now + self.settings.worker_timeout
                )
        w.load += len(commands)
        self._transmit(w, commands)

    def _save(self, env_id: int) -> bytes:
        record = self.envs[env_id]
        self._set_state(record, SAVING)
        self._send(env_id, (OP_SAVE, env_id, 0, None))
        self._flush_worker(self.workers[record.worker])
        self._receive(None, lambda: env_id in self._saved or env_id in self._save_error)
        if env_id in self._save_error:
            raise self._save_error.pop(env_id)
        return self._saved.pop(env_id)

    # -- receiving ---------------------------------------------------------------------

    @property
    def result_queue_depth(self) -> int:
        if not self.res.closed and self.failure is None:
            self._receive(0.0)
        return len(self.ready)

    def _collect(self, max_results: int | None, timeout: float | None) -> None:
        self.flush()
        if self.ready:
            self._receive(0.0)
        elif self._in_flight:
            self._receive(timeout, self._has_result)

    def _receive(self, timeout: float | None, until: Callable[[], bool] | None = None) -> None:
        """Take in all that the workers have sent; with `until`, wait up to `timeout`
        seconds (None: no limit) until it holds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        timed = self.settings.worker_timeout is not None or self.settings.restart_workers
        wait: float | None = 0.0
        while True:
            self._take_in(wait)
            next_timer = self._run_timers() if timed else None
            if until is None or until():
                return
            now = time.monotonic()
            if deadline is None:
                wait = None
            else:
                wait = deadline - now
                if wait <= 0:
                    return
            if next_timer is not None:
                wait = next_timer - now if wait is None else min(wait, next_timer - now)
                wait = max(wait, 0.0)

    def _run_timers(self) -> float | None:
        """Start replacements whose backoff is over and kill workers that stopped
        answering; returns when the next timer falls due (None: no timer)."""
        now = time.monotonic()
        if now < self._next_timer_check:
            return None if self._next_timer_check == math.inf else self._next_timer_check
        timeout = self.settings.worker_timeout
        next_due = math.inf
        for w in list(self.workers):
            if not self._running(w):
                if w.start_at <= now:
                    self._launch(w)
                if not self._running(w):  # waiting, or its start failed and waits again
                    next_due = min(next_due, w.start_at)
            elif timeout is not None and w.load:
                due = max(w.busy_since, w.last_heard) + timeout
                if due <= now:
                    w.hung = True
                    self._kill_hung(w)
                else:
                    next_due = min(next_due, due)
        # Between timers nothing needs looking at: the hot path skips the loop.
        self._next_timer_check = next_due
        return None if next_due == math.inf else next_due

    def _launch(self, w: Any) -> None:
        """Start a replacement worker and send it the commands that waited for it."""
        try:
            self._start(w)
        except (OSError, EOFError) as error:
            # The process could not be started at all: e.g. a signal to the whole process
            # group (a user's Ctrl-C or SIGTERM) also ended multiprocessing's fork server.
            # Try again later, within the same restart budget as a worker that died.
            self._start_failed(w, error)
            return
        self._next_timer_check = 0.0
        self._flush_worker(w)

    def _start_failed(self, w: Any, error: BaseException) -> None:
        """Worker `w`'s replacement could not be started: count it as a restart and try
        again after the backoff, or fail the pool once over `max_restarts_per_minute`."""
        message = f"worker {w.index} could not be started: {error!r}"
        self._spend_restart(w, message, None, None)
        w.streak += 1  # a failed start is one more failure in a row: the same backoff
        delay = self._backoff(w.streak)
        w.start_at = time.monotonic() + delay
        self._log_restart(message, None, delay)

    def _backoff(self, streak: int) -> float:
        """Seconds before a restart after `streak` failures in a row: none after the
        first, then `restart_backoff` doubling each time, at most MAX_BACKOFF_S."""
        if streak <= 1:
            return 0.0
        return min(self.settings.restart_backoff * 2.0 ** (streak - 2), MAX_BACKOFF_S)

    def _spend_restart(self, w: Any, message: str, tb: str | None, exitcode: int | None) -> None:
        """Count a restart of worker `w` against `max_restarts_per_minute`; over it, the
        pool fails with `message` and the limit."""
        settings = self.settings
        now = time.monotonic()
        times = self._restart_times
        while times and times[0] <= now - 60.0:
            times.popleft()
        if len(times) >= settings.max_restarts_per_minute:
            first, newline, rest = message.partition("\n")
            self.failure = MultiEnvError(
                f"{first} (no more restarts: {len(times)} restarts in the last minute, the "
                f"limit is max_restarts_per_minute={settings.max_restarts_per_minute})"
                f"{newline}{rest}",
                w.env_ids,
                w.index,
                tb,
                exitcode,
            )
            raise self.failure
        times.append(now)
        self.restarts += 1

    # -- faults ---------------------------------------------------------------------------

    def _death_cause(self, w: Any, fault: tuple[int, str, str] | None) -> str:
        """How a worker ended, for its error message, when it hung or an env raised."""
        if w.hung:
            return f"did not answer within {self.settings.worker_timeout:g} s and was killed"
        if fault is not None:
            env_id, phase, _ = fault
            where = f"env {env_id} raised in {phase}" if env_id >= 0 else f"raised in {phase}"
            return f"failed: {where}"
        return ""

    def _worker_lost(
        self,
        w: Any,
        message: str,
        tb: str | None,
        exitcode: int | None,
        startup: bool,
    ) -> None:
        """Worker `w` is gone (`message` says how): raise, or replace it and go on."""
        if tb:
            message += f"\nworker traceback:\n{tb.rstrip()}"
        error = MultiEnvError(message, w.env_ids, w.index, tb, exitcode)
        settings = self.settings
        if startup or not settings.restart_workers:
            self.failure = error
            raise error
        self._spend_restart(w, message, tb, exitcode)
        now = time.monotonic()
        streak = w.streak + 1
        delay = self._backoff(streak)
        self._log_restart(message, tb, delay)
        self._restart(w, message.split("\n", 1)[0], streak, now + delay)

    def _log_restart(self, message: str, tb: str | None, delay: float) -> None:
        """One line per restart; a traceback only the first time it is seen."""
        first_line = message.split("\n", 1)[0]
        when = f"in {delay:g} s" if delay else "now"
        key = (tb or "").strip().rsplit("\n", 1)[-1]
        if tb and key not in self._logged_faults:
            self._logged_faults.add(key)
            log.warning(
                "%s; restarting it %s (restart %d)\n%s",
                first_line,
                when,
                self.restarts,
                tb.rstrip(),
            )
        else:
            log.warning("%s; restarting it %s (restart %d)", first_line, when, self.restarts)

    def _restart(self, w: Any, reason: str, streak: int, start_at: float) -> None:
        """Replace dead worker `w` (the new one starts at `start_at`); settle its envs."""
        fresh = self._new_worker(w.index, w.generation + 1, streak, start_at)
        self.workers[w.index] = fresh
        self._next_timer_check = 0.0
        for env_id in w.env_ids:
            record = self.envs[env_id]
            state = record.state
            was_lost_reset = record.lost_reset
            self._set_state(record, IDLE)
            record.lost_reset = False
            if state == SAVING:
                self._save_error[env_id] = MultiEnvError(
                    f"save_state({env_id}) failed: {reason}", [env_id], w.index
                )
                record.lost = reason
            elif state == RESETTING:
                seed, saved = record.reset_args
                self.submit_reset(env_id, saved, seed)
                record.lost_reset = was_lost_reset
            elif state == STEPPING:
                record.lost = reason
                self._report_lost(env_id)
            elif not record.needs_reset:
                record.lost = reason  # told at its next submit
        if start_at <= time.monotonic():
            self._launch(fresh)
