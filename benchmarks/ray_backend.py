"""Steps/s of OakEmuMultiEnv's ray backend against its process backend: the price of
distribution, measured on one machine.

    python benchmarks/ray_backend.py [--seconds 3] [--rounds 5] [--envs 8 16 32]

For each number of envs both backends run the same game with the same number of
workers (one per core), random actions and ``auto_reset=True``, driven by the same
loop as a training actor's: poll every ready result, then submit their actions in one
`batch` block. Both are built first and measured in interleaved rounds; the figures
are medians, and the ratio is the median of the per-round ratios (pairs measured
seconds apart, which vary less with the machine's background load). The ray backend
runs on a local Ray instance started here (``--ray-address`` to use a running cluster).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from typing import Any

import numpy as np
import ray

from multienv_throughput import ACTION_TABLE, background_load
from oakemu_rl.envs import OakEmuMultiEnv
from oakemu_rl.envs.multi_env import default_num_workers

RAY_WORKER_NICE = 15


class Contender:
    """One backend with `num_envs` envs, every env stepping."""

    def __init__(self, backend: Any, game: str, num_envs: int, workers: int) -> None:
        self.name = backend
        # Ray starts its workers at nice 15 (Ray's worker_niceness); the worker processes
        # get the same, so that on a busy machine both lose alike to other processes.
        self.envs = OakEmuMultiEnv(
            game,
            num_envs=num_envs,
            num_workers=workers,
            backend=backend,
            auto_reset=True,
            worker_nice=RAY_WORKER_NICE if backend == "process" else 0,
        )
        n = int(self.envs.action_space.n)
        self.actions = np.random.default_rng(2).integers(n, size=ACTION_TABLE).tolist()
        self.envs.reset_all()
        while self.envs.in_flight:
            self.envs.poll()
        for env_id in range(num_envs):
            self.envs.submit(env_id, 0)

    def run(self, seconds: float) -> float:
        envs, actions, steps = self.envs, self.actions, 0
        poll, submit, batch = envs.poll, envs.submit, envs.batch
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            results = poll()
            with batch():
                for r in results:
                    submit(r.env_id, actions[steps % ACTION_TABLE])
                    steps += 1
        return steps / (time.perf_counter() - start)

    def close(self) -> None:
        self.envs.close()


def measure(args: argparse.Namespace, num_envs: int) -> tuple[float, float, float]:
    """Medians of process and ray steps/s, and the median per-round ratio ray/process."""
    contenders = [
        Contender(backend, args.game, num_envs, args.workers) for backend in ("process", "ray")
    ]
    figures: dict[str, list[float]] = {c.name: [] for c in contenders}
    try:
        for c in contenders:  # warm up
            c.run(min(1.0, args.seconds))
        for i in range(args.rounds):
            for c in contenders if i % 2 == 0 else contenders[::-1]:
                figures[c.name].append(c.run(args.seconds))
    finally:
        for c in contenders:
            c.close()
    process, on_ray = figures["process"], figures["ray"]
    ratio = statistics.median(r / p for r, p in zip(on_ray, process, strict=True))
    for name, values in figures.items():
        spread = ", ".join(f"{v:.0f}" for v in values)
        print(f"  {name:<8}{statistics.median(values):>8.0f} steps/s  (rounds: {spread})")
    return statistics.median(process), statistics.median(on_ray), ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median)")
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--workers", type=int, default=default_num_workers())
    parser.add_argument("--game", default="forest_run", help="the OakEmu game to measure")
    parser.add_argument("--ray-address", help="a running Ray cluster (default: a local one)")
    args = parser.parse_args(argv)

    cores = default_num_workers()
    print(
        f"python {sys.version.split()[0]}, {cores} cores, ray {ray.__version__}, "
        f"game {args.game}, {args.workers} workers"
    )
    load = background_load()
    if load is not None:
        print(f"background load before the run: {load:.2f} busy cores of {cores}")
    ray.init(
        address=args.ray_address,
        num_cpus=None if args.ray_address else cores,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    rows = []
    try:
        for num_envs in args.envs:
            print(f"\n== {num_envs} envs", flush=True)
            rows.append((num_envs, *measure(args, num_envs)))
    finally:
        ray.shutdown()
    print("\n  envs   process       ray   ray/process (median of per-round ratios)")
    for num_envs, process, on_ray, ratio in rows:
        print(f"  {num_envs:>4}  {process:>8.0f}  {on_ray:>8.0f}   {ratio:6.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
