"""RuntimeContext: what every thread of a run shares."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import torch

from .metrics import MetricsSink, NullSink

if TYPE_CHECKING:
    from ..trajectories.demonstrations import DemonstrationSet
    from .student_anchor import StudentAnchor

C = TypeVar("C")


@dataclass
class RuntimeContext(Generic[C]):
    """The configuration, torch device, run directory, metrics sink, stop event and RNG of a run.

    `rng` is the run's seeded generator; components that need their own stream take
    one with `spawn_rng(name)`, which is deterministic in the seed and the name.
    """

    config: C
    device: torch.device
    run_dir: Path
    metrics: MetricsSink = field(default_factory=NullSink)
    stop_event: threading.Event = field(default_factory=threading.Event)
    seed: int = 0
    torch_threads: int = 0
    """Torch intra-op threads for every thread of the run (0: leave torch's default)."""
    demonstrations: DemonstrationSet | None = None
    """The run's demonstrations (`demos.paths`), loaded and checked; None without any."""
    student_anchor: StudentAnchor | None = None
    """The loss towards the distilled student the run started from (`init_anchor`); None
    for a run that did not start from one."""
    session_clock: Callable[[], float] | None = None
    """Seconds this session of the run has trained (what `max_time_s` limits); None: the
    budget is in steps only."""
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self._errors: list[BaseException] = []
        self._stop_reason: str | None = None
        self._lock = threading.Lock()

    def budget_used(self, steps: int) -> float:
        """How much of the run's budget is spent at env step `steps`, from 0 to 1: the
        larger of the steps' share of `total_steps` and, with `max_time_s`, the session
        time's share of it. Schedules over "the run" (PPO's learning-rate annealing,
        prioritized replay's beta) follow it, so that a run budgeted in minutes anneals
        over its minutes."""
        config: Any = self.config
        used = steps / max(1, config.total_steps)
        limit = config.max_time_s
        if limit is not None and self.session_clock is not None:
            used = max(used, self.session_clock() / limit)
        return float(min(1.0, max(0.0, used)))

    def spawn_rng(self, name: str) -> np.random.Generator:
        """A generator of its own for the component `name`."""
        key = [self.seed, *name.encode()]
        return np.random.default_rng(np.random.SeedSequence(key))

    def enter_thread(self, threads: int | None = None) -> None:
        """Call first thing on each thread that runs torch: torch's thread count is
        per thread, and a new thread would otherwise use every core (and oversubscribe).

        `threads` overrides `torch_threads` for this thread (the learner may use more
        threads than the actor).
        """
        count = threads if threads is not None and threads > 0 else self.torch_threads
        if count > 0:
            # torch initialises a thread's OpenMP count lazily, on its first parallel
            # op, from the count last set by *any* thread; asking for it first makes
            # that happen now, so the count set next sticks to this thread.
            torch.get_num_threads()
            torch.set_num_threads(count)

    @property
    def stopping(self) -> bool:
        """Whether the run has been asked to stop."""
        return self.stop_event.is_set()

    def request_stop(self, reason: str | None = None) -> None:
        """Ask every thread of the run to stop; the first reason given is kept."""
        with self._lock:
            if self._stop_reason is None and reason is not None:
                self._stop_reason = reason
        self.stop_event.set()

    @property
    def stop_reason(self) -> str | None:
        """Why the run was asked to stop (the first reason given), if it was."""
        return self._stop_reason

    def report_error(self, error: BaseException) -> None:
        """Record an exception raised in a worker thread and stop the run."""
        with self._lock:
            self._errors.append(error)
        self.stop_event.set()

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions reported by threads of this run."""
        with self._lock:
            return list(self._errors)

    def rng_state(self) -> dict[str, Any]:
        """The run RNG's state (JSON-serialisable)."""
        return dict(self.rng.bit_generator.state)

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore the run RNG's state."""
        self.rng.bit_generator.state = state
