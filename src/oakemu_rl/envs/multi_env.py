"""OakEmuMultiEnv: many envs on workers, stepped asynchronously.

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

Backends
    Env i lives on worker ``i % num_workers``. A backend is a class of `backends`
    behind one interface (`backends.base.EnvPool`): ``process`` (worker processes of
    this machine, observations in shared memory; the default), ``inline`` (every env in
    this process, for debugging) and ``ray`` (workers are Ray actors placed across a
    cluster; results and observations travel in batches through Ray's object store).

Who owns an observation
    ``StepResult.observation`` (and ``info["final_observation"]``) are read-only
    views into memory owned by the multi-env (shared with the workers of the process
    backend; the ray backend copies each observation there as its result arrives).
    Only the slot of the command being run is written, cycling through three slots
    per env, so a view stays valid until the caller submits the env's *second*
    command after that result. In practice: you may read it until you submit that
    env's next step (the simple rule), and even after that, until you have
    submitted once more (so the previous result's observation is still there when
    the next result arrives, enough to build an (s, a, r, s') transition without
    copying). Copy it (or pass ``copy_observations=True``) to keep it longer.
    After `close` the views keep their last contents.

Seeding
    Env i's first reset gets seed ``seed + i`` (unless `submit_reset` names a seed);
    later resets continue that env's own generator. The inline, process and ray
    backends therefore produce identical results for the same seeds and actions.

Faults
    A worker that dies (a crash, a kill, an exception raised by a game; for the ray
    backend also a lost node) is noticed at once, even while `poll` blocks (a lost
    node: when Ray declares it dead). By default the next call raises
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
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import numpy as np

from .backends import require_ray
from .backends.base import EnvPool, MultiEnvError, PoolSettings, Resources, StepResult
from .backends.process import default_num_workers
from .shared_obs import SlotKind, SlotLayout
from .worker import EnvFactory, WorkerPriority, is_worker_priority

__all__ = ["MultiEnvError", "OakEmuMultiEnv", "StepResult", "default_num_workers"]

EnvWrapper = Callable[[Any], Any]
"""A picklable callable that wraps each env a game builds, where the env runs (a search
teacher that labels its states, say)."""

Backend = Literal["process", "inline", "ray"]
BACKENDS: tuple[Backend, ...] = ("process", "inline", "ray")


def _make_game_env(
    game: str | Path, observation_config: Any, env_wrapper: EnvWrapper | None, env_id: int
) -> Any:
    from .factory import make_env

    env = make_env(game, observation_config)
    return env if env_wrapper is None else env_wrapper(env)


def _make_pool(backend: Backend, settings: PoolSettings, resources: Resources) -> EnvPool:
    if backend == "inline":
        from .backends.inline import InlinePool

        return InlinePool(settings, resources)
    if backend == "ray":
        from .backends.ray_pool import RayPool

        return RayPool(settings, resources)
    from .backends.process import ProcessPool

    return ProcessPool(settings, resources)


class OakEmuMultiEnv:
    """N envs (OakEmu games or Gymnasium backends) on W workers, no lockstep.

    Give `game` (a bundled game, a YAML path or ``"gym:<id>"``) or `env_factory`,
    a picklable callable that builds env ``env_id`` (``env_factory(env_id)``).
    `num_workers` defaults to the number of cores (never more than `num_envs`; for
    ``backend="ray"``, the cluster's CPUs).
    ``backend="inline"`` runs the envs in this process (for debugging and tests);
    commands then run, in submission order, when `poll` is called, and an env
    that raises always raises `MultiEnvError` (`restart_workers` is for workers).
    ``backend="ray"`` runs them on Ray actors (``pip install 'oakemu-rl[ray]'``),
    connecting to the cluster at `ray_address` (``"auto"``, ``"HOST:PORT"``; None: the
    cluster this process is connected to, or a new local one).

    Other options: `auto_reset` (an ended episode restarts at once; the step's
    result carries ``info["final_observation"]`` and ``info["final_info"]``),
    `observation_config` and `env_wrapper` (for `game`: a picklable callable applied to
    each env where it runs, on every backend), `copy_observations` (poll returns private
    copies), `start_method` (``forkserver`` by default), `batch_latency` (how long
    a worker process may hold results of fast envs to send them together),
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
        ray_address: str | None = None,
        env_wrapper: EnvWrapper | None = None,
    ) -> None:
        if (game is None) == (env_factory is None):
            raise ValueError("give exactly one of game= and env_factory=")
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, not {num_envs}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if backend == "ray":
            require_ray()
        elif ray_address is not None:
            raise ValueError(f"ray_address is for backend='ray', not {backend!r}")
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
            env_factory = functools.partial(_make_game_env, game, observation_config, env_wrapper)
        elif env_wrapper is not None:
            raise ValueError("env_wrapper is for game=; wrap the envs in env_factory instead")
        self.num_envs = num_envs
        self.backend: Backend = backend
        self.seed = seed
        self.auto_reset = auto_reset
        self.restart_workers = restart_workers
        self.max_restarts_per_minute = max_restarts_per_minute
        self.restart_backoff = restart_backoff
        self.worker_timeout = worker_timeout
        self.copy_observations = copy_observations
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
        settings = PoolSettings(
            factory=env_factory,
            layout=SlotLayout(num_envs, tuple(shape), np.dtype(self.observation_space.dtype).str),
            seed=seed,
            auto_reset=auto_reset,
            num_workers=num_workers,
            restart_workers=restart_workers,
            max_restarts_per_minute=max_restarts_per_minute,
            restart_backoff=restart_backoff,
            worker_timeout=worker_timeout,
            batch_latency=batch_latency,
            startup_timeout=startup_timeout,
            worker_nice=worker_nice,
            start_method=start_method,
            shared_memory=shared_memory,
            game=game,
            observation_config=observation_config,
            env_wrapper=env_wrapper,
            ray_address=ray_address,
        )
        resources = Resources()
        self._finalizer = weakref.finalize(self, resources.release)
        self._pool = _make_pool(backend, settings, resources)
        self.num_workers = self._pool.num_workers

    # -- public API ------------------------------------------------------------------

    @property
    def result_queue_depth(self) -> int:
        """How many results are ready and not yet polled (without blocking)."""
        return self._pool.result_queue_depth

    @property
    def worker_pids(self) -> list[int]:
        """The process ids of the live workers (empty for the inline backend; for the ray
        backend, the actors' process ids on their own nodes)."""
        return self._pool.worker_pids

    @property
    def ray_actors(self) -> list[Any]:
        """The handles of the live worker actors of the ray backend (empty for the others)."""
        return list(getattr(self._pool, "actors", []))

    @property
    def _workers(self) -> list[Any]:
        """The backend's worker records (tests watch their messages)."""
        return list(getattr(self._pool, "workers", []))

    @property
    def worker_restarts(self) -> int:
        """How many workers have been restarted after a fault."""
        return self._pool.restarts

    @property
    def shared_memory_name(self) -> str | None:
        """The /dev/shm name of the observation buffer, None when it has none (memfd)."""
        return self._pool.slots.name

    @property
    def in_flight(self) -> int:
        """How many submitted commands have not been returned by `poll` yet."""
        return self._pool.in_flight

    def submit(self, env_id: int, action: Any) -> None:
        """Start one step of env `env_id` with `action`.

        The command goes out at once when the env's worker has fewer than two
        commands queued, else with the next `poll` or `flush` (an actor that
        does long work between submitting and polling should `flush` first).
        """
        self._pool.submit(env_id, action)

    def submit_reset(
        self, env_id: int, state: bytes | None = None, seed: int | None = None
    ) -> None:
        """Reset env `env_id`, from a saved machine `state` when given."""
        self._pool.submit_reset(env_id, state, seed)

    def reset_all(self, states: Sequence[bytes | None] | None = None) -> None:
        """Submit a reset for every env (from ``states[i]`` where given)."""
        for env_id in range(self.num_envs):
            self.submit_reset(env_id, None if states is None else states[env_id])

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Hold back the commands submitted in the block and send them when it ends, one
        message per worker: an actor that submits many envs' actions at once (after one
        batched inference) wakes each worker once instead of once per command."""
        pool = self._pool
        pool.holding += 1
        try:
            yield
        finally:
            pool.holding -= 1
            if not pool.holding and not pool.closed:
                pool.flush()

    def flush(self) -> None:
        """Send submitted commands that are still held back (`poll` does this too)."""
        self._pool.flush()

    def poll(
        self, max_results: int | None = None, timeout: float | None = None
    ) -> list[StepResult]:
        """Results in the order envs finished; waits up to `timeout` s for the first one.

        ``timeout=None`` waits until there is one (returns [] at once when nothing is
        in flight); ``timeout=0`` never blocks.
        """
        results = self._pool.poll(max_results, timeout)
        if self.copy_observations:
            for r in results:
                r.observation = r.observation.copy()
                final = r.info.get("final_observation")
                if final is not None:
                    r.info["final_observation"] = final.copy()
        return results

    def save_state(self, env_id: int) -> bytes:
        """The full machine state of env `env_id` (it must have no command in flight)."""
        return self._pool.save_state(env_id)

    def close(self) -> None:
        """Stop the workers and free the observation buffer; bounded time, idempotent.

        Observations still held stay readable (their memory goes with the last
        view) but are no longer updated.
        """
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._pool.closed

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
