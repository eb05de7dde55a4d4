"""CPU time of a training run, worker processes included, and what it bounds.

A run's CPU time per env step says how fast it could go at most on this machine:
with every core busy the whole time, `cores / cpu_per_step` steps per second. The
benchmarks print both contenders' figures, so that a ratio can be read against
the most the hardware allows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any


def descendant_cpu_s() -> float:
    """CPU seconds (user + system) used so far by this process's live descendants
    (worker processes and the forkserver), from /proc; 0 where /proc is missing."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0.0
    parent_of: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(entry)
        parent_of[pid] = int(fields[1])
        ticks[pid] = int(fields[11]) + int(fields[12])
    me, total = os.getpid(), 0
    for pid in ticks:
        ancestor = parent_of.get(pid)
        while ancestor is not None and ancestor > 1 and ancestor != me:
            ancestor = parent_of.get(ancestor)
        if ancestor == me:
            total += ticks[pid]
    return total / os.sysconf("SC_CLK_TCK")


class RunCPU:
    """CPU seconds of this process and of its worker processes between `start` and `stop`.

    Workers exit when their env closes, and their CPU time goes with them (they are the
    forkserver's children, not ours): `wrap_env_factory` reads it just before.
    """

    def __init__(self) -> None:
        self._process_start = 0.0
        self._children_start = 0.0
        self._children_end = 0.0
        self.cpu_s = 0.0

    def wrap_env_factory(self, factory: Callable[[], Any]) -> Callable[[], Any]:
        def build() -> Any:
            env = factory()
            close = env.close

            def close_after_reading_cpu() -> None:
                if not self._children_end:
                    self._children_end = descendant_cpu_s()
                close()

            env.close = close_after_reading_cpu
            return env

        return build

    def start(self) -> None:
        self._children_start = descendant_cpu_s()
        self._process_start = time.process_time()

    def stop(self) -> float:
        process = time.process_time() - self._process_start
        children_end = self._children_end or descendant_cpu_s()
        self.cpu_s = process + max(0.0, children_end - self._children_start)
        return self.cpu_s


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def bound_report(ours: dict[str, Any], peer: dict[str, Any], peer_name: str = "SB3") -> str:
    """Cores each side kept busy, and the ratio ours could reach at most on this machine.

    Both dicts hold `steps_per_s` and `cpu_ms_per_step`.
    """
    n = cores()
    lines = []
    for name, r in (("ours", ours), (peer_name, peer)):
        used = r["steps_per_s"] * r["cpu_ms_per_step"] / 1000
        lines.append(
            f"{name}: {r['cpu_ms_per_step']:.3f} ms of CPU per env step, {used:.2f} of {n} "
            f"cores busy on average; {n} cores at that cost: at most "
            f"{1000 * n / r['cpu_ms_per_step']:,.0f} steps/s"
        )
    most = (1000 * n / ours["cpu_ms_per_step"]) / peer["steps_per_s"]
    lines.append(
        f"bound: with every core busy all the time, ours at its CPU cost per step would reach "
        f"{most:.2f}x {peer_name}'s measured steps/s on this machine (measured: "
        f"{ours['steps_per_s'] / peer['steps_per_s']:.2f}x)"
    )
    return "\n".join(lines)
