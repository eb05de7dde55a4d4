"""The ray backend: envs on Ray actors placed across a cluster.

Each worker is a Ray actor (`EnvGroup`) hosting a group of envs in an `EnvHost`; the
actors are spread over the cluster's nodes, as many on a node as it has CPUs. The pool
sends a worker the commands submitted since its last call as one actor call; the actor
runs them in order and returns their results with the observations they produced
stacked in one numpy array, which travels through Ray's object store (no per-step
pickling of observations). The pool copies each observation into its own slots, so a
result's view lives exactly as long as with the process backend.

Results come back call by call, in the order the calls finish, with `ray.wait` over
all calls in flight. A call that fails because its actor died (killed, crashed, or its
node was lost) marks the worker dead: with ``restart_workers`` a new actor, placed
where Ray finds room, takes its envs and the episodes they held end as truncated,
exactly as for a worker process.

Game files travel through the object store too: for a game given as a YAML path the
YAML, its snapshot or tape (and the tape's cached state) are put there once, and each
node writes them to a folder of its own, named by their hash. Bundled games and
``gym:`` ids need nothing but the package on the node.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..shared_obs import SLOTS_PER_ENV, ObservationSlots, SlotLayout
from ..worker import Command, EnvFactory, EnvFault, EnvHost, WorkerPriority, lower_priority
from .base import MultiEnvError, PoolSettings, Resources, WorkerPool, WorkerRecord

__all__ = ["EnvGroup", "RayPool", "ShippedGame", "connect"]

Reply = tuple[list[tuple[Any, ...]], npt.NDArray[Any] | None]


def connect(address: str | None) -> None:
    """Connect this process to the Ray cluster at `address` (None: the one it is
    connected to, else $RAY_ADDRESS or a new local one), quietly.

    `ray.init` installs a SIGTERM handler of its own; the one the program had (which
    stops a training run cleanly) is put back.
    """
    if ray.is_initialized():
        return
    main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGTERM) if main else None
    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    if handler is not None:
        signal.signal(signal.SIGTERM, handler)


# -- game files ------------------------------------------------------------------------


class ShippedGame:
    """An env factory for a game whose files travel through Ray's object store.

    `files` maps paths (relative to a common folder) to their bytes; the first call on
    a node writes them under the temporary folder, in a folder named by their hash.
    """

    def __init__(
        self,
        files: Any,
        digest: str,
        yaml_name: str,
        observation_config: Any,
        env_wrapper: Any = None,
    ):
        self.files = files
        self.digest = digest
        self.yaml_name = yaml_name
        self.observation_config = observation_config
        self.env_wrapper = env_wrapper

    def path(self) -> Path:
        root = Path(tempfile.gettempdir()) / "oakemu-ray-games" / self.digest
        if not (root / self.yaml_name).exists():
            root.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{self.digest}-", dir=root.parent))
            files: dict[str, bytes] = ray.get(self.files)
            for name, data in files.items():
                target = staging / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            with contextlib.suppress(OSError):  # another actor of this node got there first
                staging.rename(root)
        return root / self.yaml_name

    def __call__(self, env_id: int) -> Any:
        from ..factory import make_env

        env = make_env(self.path(), self.observation_config)
        return env if self.env_wrapper is None else self.env_wrapper(env)


def game_files(game: str | Path) -> tuple[dict[str, bytes], str] | None:
    """The files of a game given as a YAML path, and the YAML's name among them; None for
    a bundled game or a gym id, which every node has."""
    from ...games.loader import bundled_games, load_game
    from ..gym_backend import is_gym_id

    if is_gym_id(game) or (isinstance(game, str) and game in bundled_games()):
        return None
    definition = load_game(game)
    yaml_path = definition.path.resolve()
    paths = [yaml_path, definition.snapshot_path]
    if definition.from_tape:
        from ...emulator.tape.cache import CACHE_DIR_NAME

        cache = yaml_path.parent / CACHE_DIR_NAME
        if cache.is_dir():
            paths += [p for p in cache.rglob("*") if p.is_file()]
    root = Path(os.path.commonpath([p.parent for p in paths]))
    files = {str(p.relative_to(root)): p.read_bytes() for p in paths}
    return files, str(yaml_path.relative_to(root))


def _ship_factory(settings: PoolSettings) -> EnvFactory:
    if settings.game is None:
        return settings.factory
    packed = game_files(settings.game)
    if packed is None:
        return settings.factory
    files, yaml_name = packed
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return ShippedGame(
        ray.put(files),
        digest.hexdigest()[:16],
        yaml_name,
        settings.observation_config,
        settings.env_wrapper,
    )


# -- the actor -----------------------------------------------------------------------------


class EnvGroup:
    """A Ray actor hosting some envs: consumes lists of commands, produces their results
    and the observations they wrote, stacked in one array (see `worker` for the tuples).

    An env that raises ends the group: its reply carries the results finished before and
    a ``("fault", env_id, phase, traceback)`` tuple, and every later call replies the same.
    """

    def __init__(
        self,
        factory: EnvFactory,
        first_seeds: dict[int, int | None],
        layout: SlotLayout,
        auto_reset: bool,
        nice: WorkerPriority,
    ) -> None:
        lower_priority(nice)
        self.slots = ObservationSlots.create(layout, "local")
        self.host: EnvHost | None = None
        self.fault: tuple[Any, ...] | None = None
        try:
            self.host = EnvHost(factory, first_seeds, self.slots, auto_reset)
        except EnvFault as fault:
            self.fault = ("fault", fault.env_id, fault.phase, fault.formatted)

    def ready(self) -> Reply:
        if self.fault is not None:
            return [self.fault], None
        return [("ready", os.getpid(), ray.get_runtime_context().get_node_id()[:8])], None

    def run(self, commands: list[Command]) -> Reply:
        if self.fault is not None or self.host is None:
            return [self.fault or ("fault", -1, "construction", "")], None
        out: list[tuple[Any, ...]] = []
        frames: list[npt.NDArray[Any]] = []
        views = self.slots.views
        for command in commands:
            try:
                result = self.host.execute(command)
            except EnvFault as fault:
                self.fault = ("fault", fault.env_id, fault.phase, fault.formatted)
                out.append(self.fault)
                break
            out.append(result)
            if len(result) == 7:
                env_id, slot, used = command[1], command[2], result[2]
                frames.extend(views[env_id][(slot + k) % SLOTS_PER_ENV] for k in range(used))
        return out, (np.stack(frames) if frames else None)


# -- the pool ----------------------------------------------------------------------------


def _node_places() -> list[str]:
    """The ids of the live nodes that have CPUs, each as many times as it has CPUs, in
    turns (node A, node B, A, B, A...)."""
    nodes = [
        (node["NodeID"], int(node["Resources"].get("CPU", 0)))
        for node in ray.nodes()  # type: ignore[no-untyped-call, unused-ignore]
        if node["Alive"]
    ]
    most = max((cpus for _, cpus in nodes), default=0)
    return [node for turn in range(most) for node, cpus in nodes if turn < cpus]


@dataclass(eq=False)
class _Actor(WorkerRecord):
    """One worker actor (none while it waits to be started)."""

    actor: Any = None
    pid: int | None = None
    node: str = ""


def _kill_actors(workers: Iterable[_Actor]) -> None:
    for w in workers:
        if w.actor is not None and ray.is_initialized():
            with contextlib.suppress(Exception):
                ray.kill(w.actor, no_restart=True)
        w.actor = None


class RayPool(WorkerPool):
    """Consumes commands as calls to Ray actors; produces their results as they finish."""

    def __init__(self, settings: PoolSettings, resources: Resources) -> None:
        connect(settings.ray_address)
        num_workers = settings.num_workers or max(1, len(_node_places()))
        super().__init__(settings, resources, "local", num_workers)
        resources.stop_workers = _kill_actors
        self._write_views = self.slots.views
        # Each call in flight: its worker, how many commands it holds, and its order.
        self._calls: dict[Any, tuple[_Actor, int, int]] = {}
        self._sequence = 0
        self._remote = ray.remote(EnvGroup)
        try:
            self._factory = _ship_factory(settings)
            for index in range(self.num_workers):
                worker = self._new_worker(index, 0, 0, 0.0)
                self._start(worker)
                self.workers.append(worker)
            self._await_ready(settings.startup_timeout)
        except BaseException:
            resources.release()
            raise

    def _new_worker(self, index: int, generation: int, streak: int, start_at: float) -> _Actor:
        env_ids = list(range(index, self.num_envs, self.num_workers))
        return _Actor(index, env_ids, generation, streak=streak, start_at=start_at)

    @property
    def actors(self) -> list[Any]:
        return [w.actor for w in self.workers if w.actor is not None]

    @property
    def worker_pids(self) -> list[int]:
        return [w.pid for w in self.workers if w.pid is not None and w.actor is not None]

    # -- starting ------------------------------------------------------------------------

    def _start(self, w: _Actor) -> None:
        settings = self.settings
        places = _node_places()
        # Worker i goes to place i: the nodes in turn, as many workers as it has CPUs.
        # An actor holds no CPU once placed (Ray's default), so a tester's pool shares
        # the nodes with the training pool; `soft`: where that node is gone, Ray chooses.
        strategy: Any = "SPREAD"
        if places:
            strategy = NodeAffinitySchedulingStrategy(places[w.index % len(places)], soft=True)
        w.actor = self._remote.options(
            scheduling_strategy=strategy, max_restarts=0, max_task_retries=0
        ).remote(
            self._factory,
            settings.first_seeds(w.env_ids, w.generation),
            settings.layout,
            settings.auto_reset,
            settings.worker_nice,
        )
        w.pid, w.node = None, ""
        w.last_heard = time.monotonic()
        self._call(w, w.actor.ready.remote(), 0)

    def _running(self, w: _Actor) -> bool:
        return w.actor is not None

    def _await_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(w.pid is not None for w in self.workers):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                late = [w.index for w in self.workers if w.pid is None]
                raise MultiEnvError(
                    f"worker actors {late} did not start within {timeout} s (does the Ray "
                    "cluster have a node with a free CPU?)",
                    [e for w in self.workers if w.pid is None for e in w.env_ids],
                )
            self._take_in(min(remaining, 1.0), startup=True)

    # -- messages ------------------------------------------------------------------------

    def _call(self, w: _Actor, ref: Any, commands: int) -> None:
        self._sequence += 1
        self._calls[ref] = (w, commands, self._sequence)

    def _transmit(self, w: _Actor, commands: list[Command]) -> None:
        self._call(w, w.actor.run.remote(commands), len(commands))

    def _take_in(self, wait: float | None, startup: bool = False) -> None:
        calls = self._calls
        if not calls:
            if wait:
                time.sleep(wait)  # a replacement waits for its backoff
            return
        refs = list(calls)
        done, _ = ray.wait(refs, num_returns=1, timeout=wait)
        if not done:
            return
        if len(refs) > 1:
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in sorted(done, key=lambda r: calls[r][2]):
            entry = calls.pop(ref, None)
            if entry is None:
                continue  # dropped with its dead actor
            w, commands, _ = entry
            try:
                results, frames = ray.get(ref)
            except RayError as error:
                self._on_actor_death(w, error, None, startup)
                continue
            self._on_reply(w, commands, results, frames, startup)

    def _on_reply(
        self,
        w: _Actor,
        commands: int,
        results: list[tuple[Any, ...]],
        frames: npt.NDArray[Any] | None,
        startup: bool,
    ) -> None:
        w.last_heard = time.monotonic()
        w.load -= commands
        fault = None
        row = 0
        for result in results:
            if len(result) == 7:
                env_id, used = result[0], result[2]
                assert frames is not None
                slot = self.envs[env_id].next_slot
                views = self._write_views[env_id]
                for k in range(used):
                    views[(slot + k) % SLOTS_PER_ENV][...] = frames[row]
                    row += 1
                w.streak = 0
                self._on_result(result)
            elif result[0] == "state":
                self._on_saved(result[1], result[2])
            elif result[0] == "ready":
                w.pid, w.node = result[1], result[2]
            else:
                fault = (result[1], result[2], result[3])
        if fault is not None:
            self._on_actor_death(w, None, fault, startup)

    # -- faults ---------------------------------------------------------------------------

    def _kill_hung(self, w: _Actor) -> None:
        self._on_actor_death(w, None, None, False)

    def _on_actor_death(
        self,
        w: _Actor,
        error: RayError | None,
        fault: tuple[int, str, str] | None,
        startup: bool,
    ) -> None:
        for ref, (owner, _, _) in list(self._calls.items()):
            if owner is w:
                del self._calls[ref]
        _kill_actors([w])
        how = self._death_cause(w, fault)
        if not how:
            detail = str(error).strip().split("\n", 1)[0] if error is not None else ""
            how = f"died ({type(error).__name__}{': ' + detail if detail else ''})"
        where = f"pid {w.pid} on node {w.node}" if w.pid is not None else "starting"
        envs = ", ".join(map(str, w.env_ids))
        message = f"worker actor {w.index} ({where}) {how}; its envs {envs} are lost"
        tb = fault[2] if fault is not None else None
        self._worker_lost(w, message, tb, None, startup)
