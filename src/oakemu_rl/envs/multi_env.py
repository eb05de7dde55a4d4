"""OakEmuMultiEnv: many envs on worker processes, stepped asynchronously.

Unlike Gymnasium's vector envs nothing happens in lockstep: `submit` starts one
env's step, `poll` returns results in the order envs finish, so a slow step or a
long reset holds back nobody but its own env.

::

    with OakEmuMultiEnv("forest_run", num_envs=8) as envs:
        envs.reset_all()
        while training:
            for r in envs.poll():
                action = policy(r.observation)           # read the view now ...
                envs.submit(r.env_id, action)            # ... it stays valid until
                                                         # the env's next submit but one

Processes and memory
    Env i lives on worker ``i % num_workers``. Each worker is a process started
    with the ``forkserver`` method by default: unlike ``fork`` it is safe when the
    parent already runs threads (the actor and learner run torch threads), and,
    unlike ``spawn``, a new worker is a fork of a server that has imported the
    emulator already, so a restart takes milliseconds. Commands go down one pipe
    per worker; results come back up the same pipe and the parent waits on all
    of them (and on the workers' process sentinels) at once, so it sees results in
    completion order and a dead worker the moment it dies. Messages hold only
    small tuples and the info dicts; observations are written by the worker into
    shared memory (`shared_obs`).

Who owns an observation
    ``StepResult.observation`` (and ``info["final_observation"]``) are read-only
    views into shared memory owned by the multi-env. The worker of env i writes
    only the slot of the command it is running, cycling through three slots per
    env, so a view stays valid until the caller submits the env's *second*
    command after that result. In practice: you may read it until you submit that
    env's next step (the simple rule), and even after that, until you have
    submitted once more (so the previous result's observation is still there when
    the next result arrives, enough to build an (s, a, r, s') transition without
    copying). Copy it (or pass ``copy_observations=True``) to keep it longer.
    After `close` the views keep their last contents.

Seeding
    Env i's first reset gets seed ``seed + i`` (unless `submit_reset` names a seed);
    later resets continue that env's own generator. The inline and the process
    backend therefore produce identical results for the same seeds and actions.

Faults
    A worker that dies (a crash, a kill, an exception raised by a game) is noticed
    at once, even while `poll` blocks. By default the next call raises
    `MultiEnvError`, which names the worker, its envs and, for an exception, carries
    the worker's traceback. With ``restart_workers=True`` a new worker takes over
    the envs and each episode that was lost is reported as truncated (``info
    ["worker_lost"]`` is True): at once for an env with a step in flight, at its
    next `submit` for the others. The new worker's envs start with fresh seeds.
    A worker that dies again before it answers anything is restarted after a
    backoff (`restart_backoff`, doubling, at most 5 s), and more than
    `max_restarts_per_minute` restarts in a minute end the restarts: the next call
    raises `MultiEnvError`, so an env that fails on every reset stops a run within
    about half a minute instead of restarting forever. With `worker_timeout`, a
    worker that holds commands and sends nothing for that long (hung, or stopped
    with SIGSTOP) is killed and treated as dead.
    `close` never hangs (workers that do not stop within a second are killed)
    and, like a killed parent, leaves no process and no named shared memory.

One thread drives an OakEmuMultiEnv (the actor); it is not thread-safe.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import multiprocessing as mp
import os
import select
import signal
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .shared_obs import SLOTS_PER_ENV, ObservationSlots, SlotKind, SlotLayout
from .worker import (
    OP_CLOSE,
    OP_RESET,
    OP_SAVE,
    OP_STEP,
    Command,
    EnvFactory,
    EnvFault,
    EnvHost,
    WorkerPriority,
    is_worker_priority,
    worker_main,
)

__all__ = ["MultiEnvError", "OakEmuMultiEnv", "StepResult"]

log = logging.getLogger(__name__)

Backend = Literal["process", "inline"]

_IDLE, _STEPPING, _RESETTING, _SAVING = 0, 1, 2, 3
_CLOSE_GRACE_S = 1.0
# The longest wait before restarting a worker that keeps dying: short enough that
# `max_restarts_per_minute` deaths in a row fall within a minute and end the restarts.
_MAX_BACKOFF_S = 5.0


@dataclass(slots=True)
class StepResult:
    """One finished command of one env: a step, or a reset (``is_reset``).

    ``observation`` is a read-only view into shared memory; see the module
    docstring for how long it stays valid. A reset result has reward 0 and is
    neither terminated nor truncated.
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


def _make_game_env(game: str | Path, observation_config: Any, env_id: int) -> Any:
    from .factory import make_env

    return make_env(game, observation_config)


def default_num_workers() -> int:
    """The number of cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(eq=False)
class _Worker:
    """One worker process, or the record of one waiting to be started (process None)."""

    index: int
    env_ids: list[int]
    generation: int
    process: Any = None
    conn: Connection | None = None
    pid: int | None = None
    ready: bool = False
    load: int = 0  # commands sent and not answered
    pending: list[Command] = field(default_factory=list)
    fault: tuple[int, str, str] | None = None
    streak: int = 0  # deaths in a row with no answer in between
    start_at: float = 0.0  # when a replacement starts (after its backoff)
    busy_since: float = 0.0  # when its load last rose from 0
    last_heard: float = 0.0  # when it last sent a message
    hung: bool = False  # killed for not answering within worker_timeout


class _Resources:
    """What must be released even when the multi-env is never closed."""

    def __init__(self) -> None:
        self.workers: list[_Worker] = []
        self.slots: ObservationSlots | None = None
        self.host: EnvHost | None = None
        self.closed = False

    def release(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.host is not None:
            self.host.close()
        _stop_workers(self.workers)
        if self.slots is not None:
            self.slots.close()


def _stop_workers(workers: Iterable[_Worker]) -> None:
    """Ask workers to close, then kill what is left; bounded time (workers ignore SIGTERM)."""
    workers = list(workers)
    for w in workers:
        if w.conn is None:
            continue
        if w.process is not None and w.process.is_alive():
            with contextlib.suppress(Exception):
                os.set_blocking(w.conn.fileno(), False)
                w.conn.send([(OP_CLOSE, -1, 0, None)])
    deadline = time.monotonic() + _CLOSE_GRACE_S
    for w in workers:
        if w.process is not None:
            w.process.join(max(0.0, deadline - time.monotonic()))
    for w in workers:
        p = w.process
        if p is not None and p.is_alive():
            p.kill()
            p.join(0.5)
        if w.conn is not None:
            with contextlib.suppress(Exception):
                w.conn.close()
        if p is not None:
            with contextlib.suppress(Exception):
                p.close()
        w.conn = None
        w.process = None


class OakEmuMultiEnv:
    """N envs (OakEmu games or Gymnasium backends) on W worker processes, no lockstep.

    Give `game` (a bundled game, a YAML path or ``"gym:<id>"``) or `env_factory`,
    a picklable callable that builds env ``env_id`` (``env_factory(env_id)``).
    `num_workers` defaults to the number of cores (never more than `num_envs`).
    ``backend="inline"`` runs the envs in this process (for debugging and tests);
    commands then run, in submission order, when `poll` is called, and an env
    that raises always raises `MultiEnvError` (`restart_workers` is for workers).

    Other options: `auto_reset` (an ended episode restarts at once; the step's
    result carries ``info["final_observation"]`` and ``info["final_info"]``),
    `observation_config` (for `game`), `copy_observations` (poll returns private
    copies), `start_method` (``forkserver`` by default), `batch_latency` (how long
    a worker may hold results of fast envs to send them together),
    `shared_memory` (``memfd`` or ``posix``; the default is memfd where there is one),
    `worker_nice` (how much the workers lower their own scheduling priority: a nice
    increment 0-19, or ``"idle"`` for Linux's SCHED_IDLE class; with fewer cores than
    busy threads, the learner and actor then win the cores they share with the workers,
    and the workers still get every core that is otherwise idle). `restart_workers`,
    `max_restarts_per_minute`, `restart_backoff` and `worker_timeout` are described in
    the module docstring, under Faults.
    """

    def __init__(
        self,
        game: str | Path | None = None,
        num_envs: int = 8,
        num_workers: int | None = None,
        backend: Backend = "process",
        seed: int | None = 0,
        *,
        env_factory: EnvFactory | None = None,
        observation_config: Any = None,
        auto_reset: bool = False,
        restart_workers: bool = False,
        max_restarts_per_minute: int = 10,
        restart_backoff: float = 0.5,
        worker_timeout: float | None = None,
        copy_observations: bool = False,
        start_method: str | None = None,
        batch_latency: float = 0.0002,
        startup_timeout: float = 120.0,
        shared_memory: SlotKind | None = None,
        worker_nice: WorkerPriority = 0,
    ) -> None:
        if (game is None) == (env_factory is None):
            raise ValueError("give exactly one of game= and env_factory=")
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, not {num_envs}")
        if backend not in ("process", "inline"):
            raise ValueError(f"backend must be 'process' or 'inline', not {backend!r}")
        if not is_worker_priority(worker_nice):
            raise ValueError(f"worker_nice must be 0-19 or 'idle', not {worker_nice!r}")
        if max_restarts_per_minute < 0 or restart_backoff < 0:
            raise ValueError(
                "max_restarts_per_minute and restart_backoff must be 0 or more, not "
                f"{max_restarts_per_minute} and {restart_backoff}"
            )
        if worker_timeout is not None and worker_timeout <= 0:
            raise ValueError(f"worker_timeout must be above 0 (or None), not {worker_timeout}")
        if env_factory is None:
            assert game is not None
            env_factory = functools.partial(_make_game_env, game, observation_config)
        self.num_envs = num_envs
        self.backend: Backend = backend
        self.seed = seed
        self.auto_reset = auto_reset
        self.restart_workers = restart_workers
        self.max_restarts_per_minute = max_restarts_per_minute
        self.restart_backoff = restart_backoff
        self.worker_timeout = worker_timeout
        self.copy_observations = copy_observations
        self._factory = env_factory
        self._batch_latency = batch_latency
        self.worker_nice = worker_nice

        # Spaces come from one env built here; it also checks the game before any
        # worker starts.
        probe = env_factory(0)
        try:
            self.observation_space: Any = probe.observation_space
            self.action_space: Any = probe.action_space
        finally:
            with contextlib.suppress(Exception):
                probe.close()
        shape = self.observation_space.shape
        if shape is None or self.observation_space.dtype is None:
            raise ValueError(
                f"observation space {self.observation_space} has no fixed shape and dtype; "
                "OakEmuMultiEnv needs array observations (a Box, or a Discrete)"
            )
        layout = SlotLayout(num_envs, tuple(shape), np.dtype(self.observation_space.dtype).str)

        self._res = _Resources()
        self._finalizer = weakref.finalize(self, self._res.release)
        n = num_envs
        self._state = [_IDLE] * n
        self._needs_reset = [True] * n
        self._holding = 0  # `batch` blocks open: commands wait for the end of the block
        self._next_slot = [0] * n
        self._obs_slot = [-1] * n
        self._reset_args: list[tuple[int | None, bytes | None]] = [(None, None)] * n
        self._lost: list[str | None] = [None] * n  # episode lost with a worker, not yet told
        self._lost_reset = [False] * n  # the reset in flight stands for a lost step
        self._lost_reasons: dict[int, str] = {}
        self._last_info: list[dict[str, Any]] = [{} for _ in range(n)]
        self._in_flight = 0
        self._saved: dict[int, bytes] = {}
        self._save_error: dict[int, MultiEnvError] = {}
        self._ready: deque[StepResult] = deque()
        self._failure: MultiEnvError | None = None
        self._restarts = 0
        self._restart_times: deque[float] = deque()
        self._logged_faults: set[str] = set()
        self._next_timer_check = 0.0
        self._inline_queue: deque[Command] = deque()

        if backend == "inline":
            self.num_workers = 1
            self._res.slots = ObservationSlots.create(layout, "local")
            self._views = self._res.slots.read_views
            try:
                self._res.host = EnvHost(
                    env_factory, self._first_seeds(range(n), 0), self._res.slots, auto_reset
                )
            except EnvFault as fault:
                self._res.release()
                raise MultiEnvError(
                    f"env {fault.env_id} could not be built:\n{fault.formatted}",
                    [fault.env_id],
                    worker_traceback=fault.formatted,
                ) from None
            self._worker_of = [0] * n
            self._workers: list[_Worker] = []
            return

        self.num_workers = max(1, min(num_workers or default_num_workers(), n))
        method = start_method or (
            "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        )
        self._ctx = mp.get_context(method)
        self._die_with_parent = method == "forkserver"
        if method == "forkserver":
            # Workers are forks of a server that has imported the emulator already.
            self._ctx.set_forkserver_preload(["__main__", "oakemu_rl.envs.worker"])
        self._res.slots = ObservationSlots.create(layout, shared_memory)
        self._views = self._res.slots.read_views
        self._worker_of = [i % self.num_workers for i in range(n)]
        self._workers = self._res.workers
        self._poller = select.poll()
        self._fd_map: dict[int, tuple[_Worker, bool]] = {}
        try:
            for index in range(self.num_workers):
                worker = _Worker(index, list(range(index, n, self.num_workers)), 0)
                self._spawn(worker)
                self._workers.append(worker)
            self._rebuild_wait_map()
            self._await_ready(startup_timeout)
        except BaseException:
            self._res.release()
            raise

    # -- construction helpers ------------------------------------------------------

    def _first_seeds(self, env_ids: Iterable[int], generation: int) -> dict[int, int | None]:
        if self.seed is None:
            return dict.fromkeys(env_ids)
        if generation == 0:
            return {i: self.seed + i for i in env_ids}
        # A restarted worker's envs must not replay the episodes of the first one.
        return {
            i: int(np.random.SeedSequence([self.seed, i, generation]).generate_state(1)[0])
            for i in env_ids
        }

    def _spawn(self, w: _Worker) -> None:
        """Start the process of worker record `w`."""
        assert self._res.slots is not None
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(  # type: ignore[attr-defined]
            target=worker_main,
            name=f"oakemu-worker-{w.index}",
            args=(
                w.index,
                child_conn,
                self._factory,
                self._first_seeds(w.env_ids, w.generation),
                self._res.slots.handle(),
                self.auto_reset,
                self._batch_latency,
                os.getpid(),
                self._die_with_parent,
                self.worker_nice,
            ),
            daemon=True,
        )
        process.start()
        child_conn.close()
        w.process, w.conn, w.pid = process, parent_conn, process.pid
        w.last_heard = time.monotonic()

    def _rebuild_wait_map(self) -> None:
        """Watch every worker's pipe and process sentinel (call before closing fds)."""
        self._poller = select.poll()
        self._fd_map = {}
        mask = select.POLLIN | select.POLLHUP | select.POLLERR
        for w in self._workers:
            if w.conn is not None and w.process is not None:
                self._fd_map[w.conn.fileno()] = (w, True)
                self._fd_map[w.process.sentinel] = (w, False)
                self._poller.register(w.conn.fileno(), mask)
                self._poller.register(w.process.sentinel, mask)

    def _await_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(w.ready for w in self._workers):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                late = [w.index for w in self._workers if not w.ready]
                raise MultiEnvError(
                    f"workers {late} did not start within {timeout} s",
                    [e for w in self._workers if not w.ready for e in w.env_ids],
                )
            events = self._poller.poll(math.ceil(min(remaining, 1.0) * 1000))
            if events:
                self._handle_events(events, startup=True)

    # -- public API ------------------------------------------------------------------

    @property
    def result_queue_depth(self) -> int:
        """How many results are ready and not yet polled (without blocking)."""
        if self.backend == "inline":
            return len(self._ready) + len(self._inline_queue)
        if not self._res.closed and self._failure is None:
            self._receive(0.0)
        return len(self._ready)

    @property
    def worker_pids(self) -> list[int]:
        """The process ids of the live workers (empty for the inline backend)."""
        return [w.pid for w in self._workers if w.pid is not None and w.process is not None]

    @property
    def worker_restarts(self) -> int:
        """How many workers have been restarted after a fault."""
        return self._restarts

    @property
    def shared_memory_name(self) -> str | None:
        """The /dev/shm name of the observation buffer, None when it has none (memfd)."""
        return self._res.slots.name if self._res.slots is not None else None

    @property
    def in_flight(self) -> int:
        """How many submitted commands have not been returned by `poll` yet."""
        return self._in_flight + len(self._ready)

    def _set_state(self, env_id: int, state: int) -> None:
        old = self._state[env_id]
        self._state[env_id] = state
        self._in_flight += (state != _IDLE) - (old != _IDLE)

    def submit(self, env_id: int, action: Any) -> None:
        """Start one step of env `env_id` with `action`.

        The command goes out at once when the env's worker has fewer than two
        commands queued, else with the next `poll` or `flush` (an actor that
        does long work between submitting and polling should `flush` first).
        """
        self._check_usable()
        self._check_idle(env_id)
        if self._lost[env_id] is not None:
            self._report_lost(env_id)
            return
        if self._needs_reset[env_id]:
            raise RuntimeError(
                f"env {env_id} has no running episode (it has not been reset, or its "
                "episode ended): call submit_reset first"
            )
        if isinstance(action, np.integer):
            action = int(action)
        self._set_state(env_id, _STEPPING)
        self._send(env_id, (OP_STEP, env_id, self._next_slot[env_id], action))

    def submit_reset(
        self, env_id: int, state: bytes | None = None, seed: int | None = None
    ) -> None:
        """Reset env `env_id`, from a saved machine `state` when given."""
        self._check_usable()
        self._check_idle(env_id)
        self._lost[env_id] = None
        self._set_state(env_id, _RESETTING)
        self._reset_args[env_id] = (seed, state)
        self._send(env_id, (OP_RESET, env_id, self._next_slot[env_id], (seed, state)))

    def reset_all(self, states: Sequence[bytes | None] | None = None) -> None:
        """Submit a reset for every env (from ``states[i]`` where given)."""
        for env_id in range(self.num_envs):
            self.submit_reset(env_id, None if states is None else states[env_id])

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Hold back the commands submitted in the block and send them when it ends, one
        message per worker: an actor that submits many envs' actions at once (after one
        batched inference) wakes each worker once instead of once per command."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            if not self._holding and not self.closed:
                self.flush()

    def flush(self) -> None:
        """Send submitted commands that are still held back (`poll` does this too)."""
        for w in self._workers:
            if w.pending:
                self._flush_worker(w)

    def poll(
        self, max_results: int | None = None, timeout: float | None = None
    ) -> list[StepResult]:
        """Results in the order envs finished; waits up to `timeout` s for the first one.

        ``timeout=None`` waits until there is one (returns [] at once when nothing is
        in flight); ``timeout=0`` never blocks.
        """
        self._check_usable()
        if self.backend == "inline":
            self._run_inline(max_results)
        else:
            self.flush()
            if self._ready:
                self._receive(0.0)
            elif self._in_flight:
                self._receive(timeout, self._has_result)
        ready = self._ready
        if max_results is None or max_results >= len(ready):
            results = list(ready)
            ready.clear()
        else:
            results = [ready.popleft() for _ in range(max_results)]
        if self.copy_observations:
            for r in results:
                r.observation = r.observation.copy()
                final = r.info.get("final_observation")
                if final is not None:
                    r.info["final_observation"] = final.copy()
        return results

    def save_state(self, env_id: int) -> bytes:
        """The full machine state of env `env_id` (it must have no command in flight)."""
        self._check_usable()
        self._check_idle(env_id)
        if self._lost[env_id] is not None:
            raise MultiEnvError(f"env {env_id} was lost with its worker; reset it first", [env_id])
        if self.backend == "inline":
            assert self._res.host is not None
            try:
                reply = self._res.host.execute((OP_SAVE, env_id, 0, None))
            except EnvFault as fault:
                raise self._env_fault_error(fault) from None
            return bytes(reply[2])
        self._set_state(env_id, _SAVING)
        self._send(env_id, (OP_SAVE, env_id, 0, None))
        self._flush_worker(self._workers[self._worker_of[env_id]])
        self._receive(None, lambda: env_id in self._saved or env_id in self._save_error)
        if env_id in self._save_error:
            raise self._save_error.pop(env_id)
        return self._saved.pop(env_id)

    def close(self) -> None:
        """Stop the workers and free the shared memory; bounded time, idempotent.

        Observations still held stay readable (their memory goes with the last
        view) but are no longer updated.
        """
        self._finalizer()
        self._views = []

    @property
    def closed(self) -> bool:
        return self._res.closed

    def __enter__(self) -> OakEmuMultiEnv:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"OakEmuMultiEnv(num_envs={self.num_envs}, num_workers={self.num_workers}, "
            f"backend={self.backend!r})"
        )

    # -- checks ------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._res.closed:
            raise RuntimeError("this OakEmuMultiEnv is closed")
        if self._failure is not None:
            raise self._failure

    def _check_idle(self, env_id: int) -> None:
        if not 0 <= env_id < self.num_envs:
            raise IndexError(f"env_id {env_id} is outside 0..{self.num_envs - 1}")
        if self._state[env_id] != _IDLE:
            raise RuntimeError(
                f"env {env_id} already has a command in flight; poll its result first"
            )

    # -- sending ---------------------------------------------------------------------

    def _send(self, env_id: int, command: Command) -> None:
        if self.backend == "inline":
            self._inline_queue.append(command)
            return
        w = self._workers[self._worker_of[env_id]]
        w.pending.append(command)
        # A worker with fewer than two commands could run dry: it gets the command
        # at once. One with more has work queued, so the command waits for the
        # next poll or flush, which sends all that was submitted in between as one
        # message: one wake-up of the worker instead of several.
        if w.load < 2 and not self._holding:
            self._flush_worker(w)

    def _flush_worker(self, w: _Worker) -> None:
        if not w.pending or w.conn is None:
            return  # a worker waiting for its restart keeps its commands until it starts
        commands, w.pending = w.pending, []
        if not w.load:
            w.busy_since = now = time.monotonic()
            if self.worker_timeout is not None:
                # Its answer is due by then: make sure the timers look at it.
                self._next_timer_check = min(self._next_timer_check, now + self.worker_timeout)
        w.load += len(commands)
        # A dead worker's pipe raises; its sentinel tells the receive loop.
        with contextlib.suppress(OSError):
            w.conn.send(commands)

    # -- inline backend ---------------------------------------------------------------

    def _run_inline(self, max_results: int | None) -> None:
        host = self._res.host
        assert host is not None
        queue = self._inline_queue
        while queue and (max_results is None or len(self._ready) < max_results):
            command = queue.popleft()
            try:
                result = host.execute(command)
            except EnvFault as fault:
                self._failure = self._env_fault_error(fault)
                raise self._failure from None
            self._on_result(result)

    def _env_fault_error(self, fault: EnvFault) -> MultiEnvError:
        return MultiEnvError(
            f"env {fault.env_id} raised in {fault.phase}:\n{fault.formatted}",
            [fault.env_id],
            worker_traceback=fault.formatted,
        )

    # -- receiving ---------------------------------------------------------------------

    def _receive(self, timeout: float | None, until: Callable[[], bool] | None = None) -> None:
        """Take in all that the workers have sent; with `until`, wait up to `timeout`
        seconds (None: no limit) until it holds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        timed = self.worker_timeout is not None or self.restart_workers
        while True:
            # (self._poller is replaced with a worker: look it up each time)
            events = self._poller.poll(0)
            while events:
                self._handle_events(events, startup=False)
                events = self._poller.poll(0)
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
            ms = -1 if wait is None else max(0, math.ceil(wait * 1000))
            events = self._poller.poll(ms)
            if events:
                self._handle_events(events, startup=False)

    def _has_result(self) -> bool:
        return bool(self._ready) or not self._in_flight

    def _run_timers(self) -> float | None:
        """Start replacements whose backoff is over and kill workers that stopped
        answering; returns when the next timer falls due (None: no timer)."""
        now = time.monotonic()
        if now < self._next_timer_check:
            return None if self._next_timer_check == math.inf else self._next_timer_check
        timeout = self.worker_timeout
        next_due = math.inf
        for w in list(self._workers):
            if w.process is None:
                if w.start_at <= now:
                    self._launch(w)
                else:
                    next_due = min(next_due, w.start_at)
            elif timeout is not None and w.load:
                due = max(w.busy_since, w.last_heard) + timeout
                if due <= now:
                    self._kill_hung(w, timeout)
                else:
                    next_due = min(next_due, due)
        # Between timers nothing needs looking at: the hot path skips the loop.
        self._next_timer_check = next_due
        return None if next_due == math.inf else next_due

    def _launch(self, w: _Worker) -> None:
        """Start a replacement worker and send it the commands that waited for it."""
        self._spawn(w)
        self._rebuild_wait_map()
        self._next_timer_check = 0.0
        self._flush_worker(w)

    def _kill_hung(self, w: _Worker, timeout: float) -> None:
        w.hung = True
        with contextlib.suppress(ProcessLookupError):
            if w.pid is not None:
                os.kill(w.pid, signal.SIGKILL)  # a stopped (SIGSTOP) process dies too
        self._on_worker_death(w, startup=False)

    def _handle_events(self, events: list[tuple[int, int]], startup: bool) -> None:
        # The map of this batch of events: a worker replaced while handling it has
        # conn None there, so a reused fd number is never read as the new worker's.
        fd_map = self._fd_map
        for fd, _ in events:
            entry = fd_map.get(fd)
            if entry is None:
                continue  # its worker was replaced while handling an earlier event
            w, is_conn = entry
            conn, process = w.conn, w.process
            if conn is None or process is None:
                continue
            if is_conn:
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    self._on_worker_death(w, startup)
                    continue
                w.last_heard = time.monotonic()
                if type(message) is list:
                    w.streak = 0
                    w.load -= len(message)
                    on_result = self._on_result
                    for result in message:
                        on_result(result)
                else:
                    self._on_control(w, message)
            elif process.exitcode is not None:
                self._drain(w)
                self._on_worker_death(w, startup)

    def _drain(self, w: _Worker) -> None:
        """Take in the messages a dead worker sent before it died."""
        conn = w.conn
        assert conn is not None
        with contextlib.suppress(EOFError, OSError):
            while conn.poll():
                message = conn.recv()
                if type(message) is list:
                    w.load -= len(message)
                    for result in message:
                        self._on_result(result)
                else:
                    self._on_control(w, message)

    def _on_result(self, result: tuple[Any, ...]) -> None:
        env_id, is_reset, used, reward, terminated, truncated, info = result
        slot = self._next_slot[env_id]
        views = self._views[env_id]
        obs_slot = (slot + used - 1) % SLOTS_PER_ENV
        self._next_slot[env_id] = (slot + used) % SLOTS_PER_ENV
        if used == 2:
            info["final_observation"] = views[slot]
        self._set_state(env_id, _IDLE)
        if self._lost_reset[env_id]:
            # The reset of a new worker's env stands for the step that was lost.
            self._lost_reset[env_id] = False
            last = self._obs_slot[env_id]
            info["final_observation"] = views[last if last >= 0 else obs_slot]
            info["final_info"] = self._lost_info(env_id, self._lost_reason(env_id))
            self._obs_slot[env_id] = obs_slot
            self._last_info[env_id] = info
            self._needs_reset[env_id] = False
            self._ready.append(StepResult(env_id, views[obs_slot], 0.0, False, True, info))
            return
        self._obs_slot[env_id] = obs_slot
        self._last_info[env_id] = info
        self._needs_reset[env_id] = (terminated or truncated) and not self.auto_reset
        self._ready.append(
            StepResult(env_id, views[obs_slot], reward, terminated, truncated, info, is_reset)
        )

    def _on_control(self, w: _Worker, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "ready":
            w.ready = True
        elif kind == "state":
            env_id = message[1]
            w.load -= 1
            self._set_state(env_id, _IDLE)
            self._saved[env_id] = message[2]
        elif kind == "fault":
            w.fault = (message[1], message[2], message[3])

    # -- faults ---------------------------------------------------------------------------

    def _describe_death(self, w: _Worker) -> tuple[str, int | None]:
        p = w.process
        exitcode = None
        if p is not None:
            p.join(1.0)
            if p.is_alive():  # it reported a fault and hangs on the way out
                p.kill()
                p.join(1.0)
            exitcode = p.exitcode
        if w.hung:
            how = f"did not answer within {self.worker_timeout:g} s and was killed"
        elif w.fault is not None:
            env_id, phase, _ = w.fault
            where = f"env {env_id} raised in {phase}" if env_id >= 0 else f"raised in {phase}"
            how = f"failed: {where}"
        elif exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = str(-exitcode)
            how = f"died with signal {name}"
        else:
            how = f"exited with code {exitcode}"
        return how, exitcode

    def _on_worker_death(self, w: _Worker, startup: bool) -> None:
        how, exitcode = self._describe_death(w)
        tb = w.fault[2] if w.fault is not None else None
        envs = ", ".join(map(str, w.env_ids))
        message = f"worker {w.index} (pid {w.pid}) {how}; its envs {envs} are lost"
        if tb:
            message += f"\nworker traceback:\n{tb.rstrip()}"
        elif startup and self._ctx.get_start_method() != "fork":
            # The usual cause: a script without a main guard, which a new worker re-runs.
            message += (
                " while starting. Workers start with the "
                f"{self._ctx.get_start_method()!r} method, which imports your main module "
                'again: put a script\'s top-level code under `if __name__ == "__main__":` '
                "(see the worker's error above)"
            )
        error = MultiEnvError(message, w.env_ids, w.index, tb, exitcode)
        old_conn, old_process = w.conn, w.process
        w.conn = None
        w.process = None
        self._rebuild_wait_map()  # before closing: a new fd may get the same number
        with contextlib.suppress(Exception):
            assert old_conn is not None
            old_conn.close()
        with contextlib.suppress(Exception):
            old_process.close()
        if startup or not self.restart_workers:
            self._failure = error
            raise error
        now = time.monotonic()
        times = self._restart_times
        while times and times[0] <= now - 60.0:
            times.popleft()
        if len(times) >= self.max_restarts_per_minute:
            first, newline, rest = message.partition("\n")
            self._failure = MultiEnvError(
                f"{first} (no more restarts: {len(times)} restarts in the last minute, the "
                f"limit is max_restarts_per_minute={self.max_restarts_per_minute}){newline}{rest}",
                w.env_ids,
                w.index,
                tb,
                exitcode,
            )
            raise self._failure
        times.append(now)
        self._restarts += 1
        streak = w.streak + 1
        delay = (
            0.0 if streak == 1 else min(self.restart_backoff * 2 ** (streak - 2), _MAX_BACKOFF_S)
        )
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
                self._restarts,
                tb.rstrip(),
            )
        else:
            log.warning("%s; restarting it %s (restart %d)", first_line, when, self._restarts)

    def _restart(self, w: _Worker, reason: str, streak: int, start_at: float) -> None:
        """Replace dead worker `w` (its process starts at `start_at`); settle its envs."""
        fresh = _Worker(w.index, w.env_ids, w.generation + 1, streak=streak, start_at=start_at)
        self._workers[w.index] = fresh
        self._next_timer_check = 0.0
        for env_id in w.env_ids:
            state = self._state[env_id]
            was_lost_reset = self._lost_reset[env_id]
            self._set_state(env_id, _IDLE)
            self._lost_reset[env_id] = False
            if state == _SAVING:
                self._save_error[env_id] = MultiEnvError(
                    f"save_state({env_id}) failed: {reason}", [env_id], w.index
                )
                self._lost[env_id] = reason
            elif state == _RESETTING:
                seed, saved = self._reset_args[env_id]
                self.submit_reset(env_id, saved, seed)
                self._lost_reset[env_id] = was_lost_reset
            elif state == _STEPPING:
                self._lost[env_id] = reason
                self._report_lost(env_id)
            elif not self._needs_reset[env_id]:
                self._lost[env_id] = reason  # told at its next submit
        if start_at <= time.monotonic():
            self._launch(fresh)

    def _lost_reason(self, env_id: int) -> str:
        return self._lost_reasons.pop(env_id, "its worker was lost")

    def _lost_info(self, env_id: int, reason: str) -> dict[str, Any]:
        """The info of the last step, marked as a truncation by a lost worker."""
        info = {
            k: v
            for k, v in self._last_info[env_id].items()
            if k not in ("final_observation", "final_info")
        }
        info.update(outcome="truncated", worker_lost=True, error=reason)
        return info

    def _report_lost(self, env_id: int) -> None:
        """The episode of env_id was lost with its worker: report it truncated."""
        reason = self._lost[env_id] or "its worker was lost"
        self._lost[env_id] = None
        if self.auto_reset:
            # The new worker resets the env; that result is shaped as the truncated step.
            self._lost_reasons[env_id] = reason
            self._set_state(env_id, _RESETTING)
            self._lost_reset[env_id] = True
            self._reset_args[env_id] = (None, None)
            self._send(env_id, (OP_RESET, env_id, self._next_slot[env_id], (None, None)))
            return
        last = self._obs_slot[env_id]
        obs = self._views[env_id][last if last >= 0 else self._next_slot[env_id]]
        self._needs_reset[env_id] = True
        info = self._lost_info(env_id, reason)
        self._ready.append(StepResult(env_id, obs, 0.0, False, True, info))
