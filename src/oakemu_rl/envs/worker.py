"""The env host of OakEmuMultiEnv and the main loop of its worker processes.

An `EnvHost` owns some envs and executes commands on them, writing observations
into shared slots and returning small result tuples. The inline backend runs one
in the caller's process; the process backend runs one per worker process, in
`worker_main`.

Wire format (all plain tuples, pickled by `Connection.send`; no arrays):

- parent -> worker: a list of commands ``(op, env_id, slot, arg)``; ``arg`` is
  the action of a step, ``(seed, state)`` of a reset, None otherwise.
- worker -> parent: a list of results ``(env_id, is_reset, slots_used, reward,
  terminated, truncated, info)`` (``slots_used`` is 2 when the step ended the
  episode and auto-reset wrote the next episode's first observation into the
  slot after the final one), or one control tuple: ``("ready", pid)``,
  ``("state", env_id, bytes)``, ``("fault", env_id, phase, traceback)``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Literal, Protocol

import numpy as np
from threadpoolctl import threadpool_limits

from .shared_obs import SLOTS_PER_ENV, ObservationSlots, SlotHandle

OP_STEP = 0
OP_RESET = 1
OP_SAVE = 2
OP_CLOSE = 3

Command = tuple[int, int, int, Any]
Result = tuple[int, bool, int, float, bool, bool, dict[str, Any]]

_PR_SET_PDEATHSIG = 1
_THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class HostedEnv(Protocol):
    """What a hosted env offers: OakEmuEnv, GymBackendEnv or any Gymnasium env."""

    observation_space: Any
    action_space: Any

    def reset(self, *, seed: int | None = ..., options: dict[str, Any] | None = ...) -> Any: ...

    def step(self, action: Any) -> Any: ...

    def close(self) -> None: ...


EnvFactory = Callable[[int], Any]


class EnvFault(Exception):
    """An env raised; carries which env, in which phase, and the formatted traceback."""

    def __init__(self, env_id: int, phase: str, formatted: str) -> None:
        super().__init__(f"env {env_id} raised in {phase}")
        self.env_id = env_id
        self.phase = phase
        self.formatted = formatted


class EnvHost:
    """Hosts the envs `env_ids` and executes commands on them."""

    def __init__(
        self,
        factory: EnvFactory,
        first_seeds: dict[int, int | None],
        slots: ObservationSlots,
        auto_reset: bool,
    ) -> None:
        self.slots = slots
        self.auto_reset = auto_reset
        self.envs: dict[int, HostedEnv] = {}
        self._first_seeds = dict(first_seeds)
        shape, dtype = slots.layout.shape, np.dtype(slots.layout.dtype)
        for env_id in first_seeds:
            try:
                env = factory(env_id)
            except Exception:
                self.close()
                raise EnvFault(env_id, "construction", traceback.format_exc()) from None
            self.envs[env_id] = env
            space = env.observation_space
            if tuple(space.shape or ()) != shape or np.dtype(space.dtype) != dtype:
                self.close()
                raise EnvFault(
                    env_id,
                    "construction",
                    f"env {env_id} has observation space {space}, but env 0 has shape "
                    f"{shape} and dtype {dtype}: every env must have the same one\n",
                )

    def execute(self, command: Command) -> Result | tuple[Any, ...]:
        """Run one command; raises EnvFault when the env raises."""
        op, env_id, slot, arg = command
        env = self.envs[env_id]
        try:
            if op == OP_STEP:
                return self._step(env_id, env, slot, arg)
            if op == OP_RESET:
                seed, state = arg
                obs, info = self._reset(env_id, env, seed, state)
                self.slots.views[env_id][slot][...] = obs
                return (env_id, True, 1, 0.0, False, False, info)
            if op == OP_SAVE:
                return ("state", env_id, bytes(env.save_state()))  # type: ignore[attr-defined]
        except Exception:
            phase = {OP_STEP: "step", OP_RESET: "reset", OP_SAVE: "save_state"}[op]
            raise EnvFault(env_id, phase, traceback.format_exc()) from None
        raise ValueError(f"unknown command {op!r}")

    def _reset(
        self, env_id: int, env: HostedEnv, seed: int | None, state: bytes | None
    ) -> tuple[Any, dict[str, Any]]:
        first = self._first_seeds.pop(env_id, None)
        if seed is None:
            seed = first
        if state is not None:
            obs, info = env.reset(seed=seed, options={"state": state})
        else:
            obs, info = env.reset(seed=seed)
        return obs, dict(info)

    def _step(self, env_id: int, env: HostedEnv, slot: int, action: Any) -> Result:
        obs, reward, terminated, truncated, info = env.step(action)
        views = self.slots.views[env_id]
        views[slot][...] = obs
        terminated, truncated = bool(terminated), bool(truncated)
        if self.auto_reset and (terminated or truncated):
            next_obs, reset_info = self._reset(env_id, env, None, None)
            views[(slot + 1) % SLOTS_PER_ENV][...] = next_obs
            reset_info["final_info"] = dict(info)
            return (env_id, False, 2, float(reward), terminated, truncated, reset_info)
        return (env_id, False, 1, float(reward), terminated, truncated, dict(info))

    def close(self) -> None:
        for env in self.envs.values():
            with contextlib.suppress(Exception):
                env.close()
        self.envs = {}


# -- worker process ---------------------------------------------------------------


WorkerPriority = int | Literal["idle"]
"""A worker's scheduling priority: a Unix nice increment (0-19), or 'idle'."""


def is_worker_priority(value: object) -> bool:
    """Whether `value` is a valid `WorkerPriority`."""
    return value == "idle" or (type(value) is int and 0 <= value <= 19)


def lower_priority(priority: WorkerPriority) -> None:
    """Lower this process's scheduling priority (never raise it; no privilege needed).

    An int above 0 is added to the nice value. 'idle' moves the process into Linux's
    SCHED_IDLE class: it runs only on cores no other task wants, and a waking task of
    normal priority takes its core at once (a nice value only shifts shares, so under
    Linux's EEVDF scheduler the learner still waited behind niced workers). Where there
    is no SCHED_IDLE, 'idle' means nice 19.
    """
    if priority == "idle":
        if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
                return
        priority = 19
    if isinstance(priority, int) and priority > 0 and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(priority)


def _limit_threads() -> None:
    """One thread per worker: the workers share the cores among themselves. The BLAS
    that numpy loaded (before this process was forked) is limited through threadpoolctl,
    since it read its thread count at load; the variables cover libraries loaded later."""
    for name in _THREAD_ENV_VARS:
        os.environ[name] = "1"
    threadpool_limits(limits=1)
    torch = sys.modules.get("torch")
    if torch is not None:  # pragma: no cover - workers do not import torch themselves
        torch.set_num_threads(1)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL us when our parent process (the fork server) exits."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _parent_alive(parent_pid: int, original_ppid: int) -> bool:
    if os.getppid() != original_ppid:
        return False
    try:
        os.kill(parent_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - the pid was reused by another user
        return False
    return True


def worker_main(
    worker_index: int,
    conn: Connection,
    factory: EnvFactory,
    first_seeds: dict[int, int | None],
    handle: SlotHandle,
    auto_reset: bool,
    batch_latency: float,
    parent_pid: int,
    die_with_parent: bool,
    nice: WorkerPriority = 0,
) -> None:
    """Host envs and serve commands until told to close or the parent dies.

    Commands are queued as they arrive and run one at a time, so a message with
    commands for several envs never waits for a reply; results are sent as soon
    as the queue runs dry, or when holding them longer would delay them by more
    than `batch_latency` seconds (fast envs get batched replies, slow ones
    immediate ones). See `lower_priority` for `nice`.
    """
    original_ppid = os.getppid()
    if die_with_parent:
        _die_with_parent()
    lower_priority(nice)
    _limit_threads()
    # The parent handles Ctrl-C and SIGTERM (a signal sent to the whole process group
    # reaches the workers too); a worker stops when it is told to, when it is killed or
    # when it sees the parent go.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    slots = ObservationSlots.attach(handle)
    try:
        host = EnvHost(factory, first_seeds, slots, auto_reset)
    except EnvFault as fault:
        with contextlib.suppress(OSError):
            conn.send(("fault", fault.env_id, fault.phase, fault.formatted))
        os._exit(1)
    try:
        conn.send(("ready", os.getpid()))
        _serve(conn, host, batch_latency, parent_pid, original_ppid)
    except EnvFault as fault:
        with contextlib.suppress(OSError):
            conn.send(("fault", fault.env_id, fault.phase, fault.formatted))
        os._exit(1)
    except (EOFError, OSError):
        os._exit(0)  # the parent is gone
    except Exception:  # e.g. an info dict that does not pickle
        with contextlib.suppress(OSError):
            conn.send(("fault", -1, "the worker loop", traceback.format_exc()))
        os._exit(1)
    host.close()
    slots.close()
    conn.close()


def _serve(
    conn: Connection,
    host: EnvHost,
    batch_latency: float,
    parent_pid: int,
    original_ppid: int,
) -> None:
    queue: deque[Command] = deque()
    out: list[Any] = []
    oldest = 0.0
    average = 0.0  # moving average of one command's run time
    clock = time.perf_counter
    poller = select.poll()  # one poll object: Connection.poll builds a selector per call
    poller.register(conn.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
    poll = poller.poll
    while True:
        if not queue:
            if out:
                conn.send(out)
                out = []
            while not poll(1000):
                if not _parent_alive(parent_pid, original_ppid):
                    os._exit(0)
            queue.extend(conn.recv())
        while poll(0):
            queue.extend(conn.recv())
        command = queue.popleft()
        if command[0] == OP_CLOSE:
            if out:
                conn.send(out)
            return
        start = clock()
        try:
            result = host.execute(command)
        except EnvFault:
            if out:  # deliver what was finished before the fault
                conn.send(out)
            raise
        now = clock()
        average += 0.1 * ((now - start) - average)
        if len(result) != 7:  # a control reply: send it now, with what is pending
            if out:
                conn.send(out)
                out = []
            conn.send(result)
            continue
        if not out:
            oldest = now
        out.append(result)
        if not queue or now - oldest + average >= batch_latency:
            conn.send(out)
            out = []
