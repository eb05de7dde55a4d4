"""The process backend: envs on worker processes of this machine.

Each worker is a process started with the ``forkserver`` method by default: unlike
``fork`` it is safe when the parent already runs threads (the actor and learner run
torch threads), and, unlike ``spawn``, a new worker is a fork of a server that has
imported the emulator already, so a restart takes milliseconds. Commands go down one
pipe per worker; results come back up the same pipe and the parent waits on all of
them (and on the workers' process sentinels) with one `select.poll` object, so it sees
results in completion order and a dead worker the moment it dies. Messages hold only
small tuples and the info dicts; observations are written by the worker into shared
memory (`shared_obs`).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import select
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ..shared_obs import default_slot_kind
from ..worker import OP_CLOSE, Command, worker_main
from .base import MultiEnvError, PoolSettings, Resources, WorkerPool, WorkerRecord

__all__ = ["ProcessPool", "default_num_workers"]

_CLOSE_GRACE_S = 1.0


def default_num_workers() -> int:
    """The number of cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(eq=False)
class _Worker(WorkerRecord):
    """One worker process (none while it waits to be started)."""

    process: Any = None
    conn: Connection | None = None
    pid: int | None = None
    ready: bool = False
    fault: tuple[int, str, str] | None = None


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


class ProcessPool(WorkerPool):
    """Consumes commands as pipe messages to worker processes; produces their replies."""

    def __init__(self, settings: PoolSettings, resources: Resources) -> None:
        super().__init__(
            settings,
            resources,
            settings.shared_memory or default_slot_kind(),
            settings.num_workers or default_num_workers(),
        )
        resources.stop_workers = _stop_workers
        method = settings.start_method or (
            "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        )
        self._ctx = mp.get_context(method)
        self._die_with_parent = method == "forkserver"
        if method == "forkserver":
            # Workers are forks of a server that has imported the emulator already.
            self._ctx.set_forkserver_preload(["__main__", "oakemu_rl.envs.worker"])
        self._poller = select.poll()
        self._fd_map: dict[int, tuple[_Worker, bool]] = {}
        try:
            for index in range(self.num_workers):
                worker = self._new_worker(index, 0, 0, 0.0)
                self._spawn(worker)
                self.workers.append(worker)
            self._rebuild_wait_map()
            self._await_ready(settings.startup_timeout)
        except BaseException:
            resources.release()
            raise

    def _new_worker(self, index: int, generation: int, streak: int, start_at: float) -> _Worker:
        env_ids = list(range(index, self.num_envs, self.num_workers))
        return _Worker(index, env_ids, generation, streak=streak, start_at=start_at)

    @property
    def worker_pids(self) -> list[int]:
        return [w.pid for w in self.workers if w.pid is not None and w.process is not None]

    # -- starting ------------------------------------------------------------------------

    def _spawn(self, w: _Worker) -> None:
        """Start the process of worker record `w`."""
        settings = self.settings
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(  # type: ignore[attr-defined]
            target=worker_main,
            name=f"oakemu-worker-{w.index}",
            args=(
                w.index,
                child_conn,
                settings.factory,
                settings.first_seeds(w.env_ids, w.generation),
                self.slots.handle(),
                settings.auto_reset,
                settings.batch_latency,
                os.getpid(),
                self._die_with_parent,
                settings.worker_nice,
            ),
            daemon=True,
        )
        try:
            process.start()
        except BaseException:
            parent_conn.close()
            child_conn.close()
            raise
        child_conn.close()
        w.process, w.conn, w.pid = process, parent_conn, process.pid
        w.last_heard = time.monotonic()

    def _start(self, w: _Worker) -> None:
        self._spawn(w)
        self._rebuild_wait_map()

    def _running(self, w: _Worker) -> bool:
        return w.process is not None

    def _rebuild_wait_map(self) -> None:
        """Watch every worker's pipe and process sentinel (call before closing fds)."""
        self._poller = select.poll()
        self._fd_map = {}
        mask = select.POLLIN | select.POLLHUP | select.POLLERR
        for w in self.workers:
            if w.conn is not None and w.process is not None:
                self._fd_map[w.conn.fileno()] = (w, True)
                self._fd_map[w.process.sentinel] = (w, False)
                self._poller.register(w.conn.fileno(), mask)
                self._poller.register(w.process.sentinel, mask)

    def _await_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(w.ready for w in self.workers):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                late = [w.index for w in self.workers if not w.ready]
                raise MultiEnvError(
                    f"workers {late} did not start within {timeout} s",
                    [e for w in self.workers if not w.ready for e in w.env_ids],
                )
            events = self._poller.poll(math.ceil(min(remaining, 1.0) * 1000))
            if events:
                self._handle_events(events, startup=True)

    # -- messages ------------------------------------------------------------------------

    def _transmit(self, w: _Worker, commands: list[Command]) -> None:
        assert w.conn is not None
        # A dead worker's pipe raises; its sentinel tells the receive loop.
        with contextlib.suppress(OSError):
            w.conn.send(commands)

    def _take_in(self, wait: float | None) -> None:
        # (self._poller is replaced with a worker: look it up each time)
        ms = -1 if wait is None else max(0, math.ceil(wait * 1000))
        events = self._poller.poll(ms)
        while events:
            self._handle_events(events, startup=False)
            events = self._poller.poll(0)

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

    def _on_control(self, w: _Worker, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "ready":
            w.ready = True
        elif kind == "state":
            w.load -= 1
            self._on_saved(message[1], message[2])
        elif kind == "fault":
            w.fault = (message[1], message[2], message[3])

    # -- faults ---------------------------------------------------------------------------

    def _kill_hung(self, w: _Worker) -> None:
        with contextlib.suppress(ProcessLookupError):
            if w.pid is not None:
                os.kill(w.pid, signal.SIGKILL)  # a stopped (SIGSTOP) process dies too
        self._on_worker_death(w, startup=False)

    def _describe_death(self, w: _Worker) -> tuple[str, int | None]:
        p = w.process
        exitcode = None
        if p is not None:
            p.join(1.0)
            if p.is_alive():  # it reported a fault and hangs on the way out
                p.kill()
                p.join(1.0)
            exitcode = p.exitcode
        how = self._death_cause(w, w.fault)
        if how:
            return how, exitcode
        if exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = str(-exitcode)
            return f"died with signal {name}", exitcode
        return f"exited with code {exitcode}", exitcode

    def _on_worker_death(self, w: _Worker, startup: bool) -> None:
        how, exitcode = self._describe_death(w)
        tb = w.fault[2] if w.fault is not None else None
        envs = ", ".join(map(str, w.env_ids))
        message = f"worker {w.index} (pid {w.pid}) {how}; its envs {envs} are lost"
        method = self._ctx.get_start_method()
        if startup and not tb and method != "fork":
            # The usual cause: a script without a main guard, which a new worker re-runs.
            message += (
                f" while starting. Workers start with the {method!r} method, which imports "
                "your main module again: put a script's top-level code under "
                '`if __name__ == "__main__":` (see the worker\'s error above)'
            )
        old_conn, old_process = w.conn, w.process
        w.conn = None
        w.process = None
        self._rebuild_wait_map()  # before closing: a new fd may get the same number
        with contextlib.suppress(Exception):
            assert old_conn is not None
            old_conn.close()
        with contextlib.suppress(Exception):
            old_process.close()
        self._worker_lost(w, message, tb, exitcode, startup)
