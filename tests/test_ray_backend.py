"""The ray backend on a real local Ray cluster: a head and a worker node on loopback.

The cluster is started once for the module with `ray start --block` in process groups
of their own, and those groups (and nothing else) are stopped afterwards, so a Ray
cluster that something else runs on this machine is left alone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oakemu_rl.envs import OakEmuMultiEnv
from oakemu_rl.envs.backends import RayNotInstalledError
from oakemu_rl.experiments import EXPERIMENTS, Experiment
from oakemu_rl.games.loader import bundled_games
from test_experiment import cartpole
from test_reliability import scalars, when

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed (pip install 'oakemu-rl[ray]')",
)

pytestmark = pytest.mark.timeout(180)

RAY = str(Path(sys.executable).parent / "ray")
# The cluster listens on loopback only; without this, Ray turns token authentication on
# as soon as the user has a token file (~/.ray/auth_token) and the driver must have it.
LOOPBACK_AUTH = {"RAY_AUTH_MODE": "disabled"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _start_node(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [RAY, "start", "--node-ip-address=127.0.0.1", "--num-cpus=1", "--block", *args],
        env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **LOOPBACK_AUTH),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: stopped as one below
    )


def _stop_node(node: subprocess.Popen[bytes]) -> None:
    if node.poll() is None:
        node.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        node.wait(10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(node.pid, signal.SIGKILL)  # whatever the node left: only its own group
    node.wait(5)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """The address of a running two-node Ray cluster; this process is connected to it."""
    import ray

    saved_auth = {name: os.environ.get(name) for name in LOOPBACK_AUTH}
    os.environ.update(LOOPBACK_AUTH)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    temp_dir = tempfile.mkdtemp(prefix="oakray")
    head = _start_node(
        "--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp_dir}"
    )
    nodes = [head]
    try:
        deadline = time.monotonic() + 90
        while not _listening(port):
            assert head.poll() is None and time.monotonic() < deadline, "the head did not start"
            time.sleep(0.2)
        nodes.append(_start_node(f"--address={address}"))
        while True:  # the port opens before the head is ready to take drivers
            try:
                ray.init(address=address, log_to_driver=False, logging_level="ERROR")
                break
            except ConnectionError:
                ray.shutdown()
                assert time.monotonic() < deadline, "the head does not take drivers"
                time.sleep(1.0)
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:  # type: ignore[no-untyped-call]
            assert time.monotonic() < deadline, "the worker node did not join"
            time.sleep(0.5)
        yield address
    finally:
        ray.shutdown()
        for node in reversed(nodes):
            _stop_node(node)
        shutil.rmtree(temp_dir, ignore_errors=True)
        for name, value in saved_auth.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def experiment(config: Any, run_dir: Path) -> Experiment[Any]:
    return EXPERIMENTS[config.algo](config, run_dir, console=False, print_fn=lambda _: None)


def ray_run(algo: str, address: str, **overrides: Any) -> Any:
    env = {"num_envs": 4, "num_workers": 2, "backend": "ray", "ray_address": address}
    return cartpole(algo, env=env, **overrides)


def test_without_ray_the_ray_backend_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(RayNotInstalledError, match=r"pip install 'oakemu-rl\[ray\]'"):
        OakEmuMultiEnv("catch", num_envs=2, backend="ray")


@pytest.mark.ray
@needs_ray
def test_ray_actors_spread_over_the_nodes_and_step_like_the_inline_backend(cluster: str) -> None:
    """Same steps, observations, saved states and restores as the inline backend."""
    actions = np.random.default_rng(5).integers(3, size=(40, 4))

    def play(backend: Any) -> tuple[list[Any], list[str]]:
        seen: list[Any] = []
        with OakEmuMultiEnv(
            "catch", num_envs=4, num_workers=2, backend=backend, seed=7, auto_reset=True
        ) as envs:
            nodes = [w.node for w in envs._workers]
            envs.reset_all()
            got: list[Any] = []
            while len(got) < 4:
                got += envs.poll()
            for row in actions:
                for env_id in range(4):
                    envs.submit(env_id, row[env_id])
                results: list[Any] = []
                while len(results) < 4:
                    results += envs.poll()
                for r in sorted(results, key=lambda r: r.env_id):
                    seen.append((r.env_id, r.observation.tobytes(), r.reward, r.done))
            state = envs.save_state(2)
            envs.submit_reset(2, state)
            (restored,) = envs.poll()
            seen.append((state, restored.observation.tobytes()))
        return seen, nodes

    on_ray, nodes = play("ray")
    inline, _ = play("inline")
    assert on_ray == inline
    assert len(set(nodes)) == 2  # one actor on each node


@pytest.mark.ray
@needs_ray
def test_a_game_yaml_reaches_the_workers_through_the_object_store(
    cluster: str, tmp_path: Path
) -> None:
    game_dir = tmp_path / "my_game"
    shutil.copytree(bundled_games()["catch"].parent, game_dir)
    yaml_path = game_dir / "catch.yaml"
    with OakEmuMultiEnv(yaml_path, num_envs=2, num_workers=2, backend="ray") as envs:
        envs.reset_all()
        results = envs.poll() + envs.poll()
        while len(results) < 2:
            results += envs.poll()
        assert all(r.is_reset for r in results)
    shipped = Path(tempfile.gettempdir()) / "oakemu-ray-games"
    assert any((d / "catch.yaml").is_file() for d in shipped.iterdir())


@pytest.mark.ray
@needs_ray
@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_a_short_run_trains_on_the_ray_backend(algo: str, cluster: str, tmp_path: Path) -> None:
    run = experiment(ray_run(algo, cluster, total_steps=1024), tmp_path / "run")
    summary = run.run()
    assert summary["steps"] == 1024 and summary["stop_reason"] == "step budget reached"
    assert summary["worker_restarts"] == 0 and summary["fault"] is None
    assert summary["episodes"] >= 1


@pytest.mark.ray
@needs_ray
def test_training_goes_on_through_a_killed_worker_actor(cluster: str, tmp_path: Path) -> None:
    import ray

    config = ray_run(
        "dqn", cluster, total_steps=3072, logging={"tensorboard": True, "log_every_steps": 256}
    )
    run = experiment(config, tmp_path / "run")
    run.build()
    killed: list[Any] = []

    def kill_one() -> None:
        actor = run.env.ray_actors[1]
        killed.append(actor)
        ray.kill(actor)

    when(lambda: run.actor.steps >= 1024, kill_one)
    summary = run.run()
    assert killed
    assert summary["steps"] == 3072 and summary["stop_reason"] == "step budget reached"
    assert summary["worker_restarts"] == 1 and summary["fault"] is None
    assert summary["truncated"] >= 1  # the episodes the actor held ended as truncated
    assert summary["episodes"] == summary["wins"] + summary["losses"] + summary["truncated"]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["worker_restarts"] == 1
    assert scalars(tmp_path / "run", "faults/worker_restarts")[-1][1] == 1.0
