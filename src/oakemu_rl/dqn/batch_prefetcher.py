"""BatchPrefetcher: prepares the learner's next batch on its own thread.

While the learner runs the backward pass and the optimizer step of batch k, the
prefetcher samples batch k+1, turns it into tensors and (with a hard-copied target
network) computes its target-network Q values. The learner's critical path keeps only
the work that needs the weights it is about to change.

The result is exactly what the learner would compute itself:

- batch k+1 is sampled after the priorities of batch k are written (the learner
  requests it then), so prioritized sampling sees the same priorities;
- target values carry the version of the target network that computed them; a batch
  prepared before a target copy is recomputed by the learner;
- `cancel()` drops a prepared batch and rewinds the sampling RNG to where it was before
  that batch was drawn, so checkpoints, rollbacks and replay-buffer swaps see the state
  of a learner that never looked ahead.

With a demonstration buffer (DQfD, `demo_replay`) a batch's last `demo_rows` rows come
from it, drawn after the agent's rows from the same RNG (so `cancel()` rewinds both).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import torch

from ..runtime.context import RuntimeContext
from .demo_replay import join_batches
from .replay_buffer import ReplayBatch, ReplayBuffer

T = TypeVar("T")


@dataclass
class PreparedBatch:
    """A sampled batch as tensors on the learner's device."""

    batch: ReplayBatch
    observations: torch.Tensor
    actions: torch.Tensor
    returns: torch.Tensor
    discounts: torch.Tensor
    next_observations: torch.Tensor
    weights: torch.Tensor
    target_q: torch.Tensor | None
    """Target-network Q values of `next_observations` (all actions), or None."""
    target_version: int
    """The target network's version that computed `target_q` (-1: none)."""
    rng_state_before: dict[str, Any]
    """The sampling RNG's state before this batch was drawn."""
    demo_rows: int = 0
    """Rows from the demonstration buffer: the last ones (importance weight 1)."""

    @property
    def agent_rows(self) -> int:
        """Rows from the agent's replay buffer: the first ones."""
        return len(self.batch.indices) - self.demo_rows

    @property
    def is_demonstration(self) -> npt.NDArray[np.bool_]:
        """Which rows come from the demonstration buffer."""
        return np.arange(len(self.batch.indices)) >= self.agent_rows


class TargetNetwork:
    """The target network, with a version bumped on every copy and a lock that keeps
    a forward pass from reading weights while they are copied."""

    def __init__(self, model: torch.nn.Module, *, bf16: bool = False) -> None:
        self.model = model
        self.version = 0
        self.lock = threading.Lock()
        self.bf16 = bf16

    def load(self, state: dict[str, Any]) -> None:
        """Copy `state` into the target network (a new version)."""
        with self.lock:
            self.model.load_state_dict(state)
            self.version += 1

    @torch.no_grad()
    def blend(self, online: list[torch.Tensor], tau: float) -> None:
        """Polyak-blend the online parameters into the target network (a new version)."""
        with self.lock:
            for target, source in zip(self.model.parameters(), online, strict=True):
                target.lerp_(source, tau)
            self.version += 1

    @torch.no_grad()
    def q_values(self, observations: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Q values of `observations` (float32) and the version that computed them."""
        with self.lock, autocast(observations.device, self.bf16):
            return self.model(observations).float(), self.version


def autocast(device: torch.device, bf16: bool) -> torch.autocast:
    """bfloat16 autocast on `device` when `bf16`, else a no-op context."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)


class BatchPrefetcher:
    """Samples and prepares one batch ahead of the learner, on a thread of its own.

    Args:
        context: the run's context (device, stop event, thread settings).
        replay_buffer: returns the current replay buffer.
        rng: the learner's sampling RNG (the prefetcher draws from it for the learner).
        batch_size: transitions per batch.
        target: the target network; its Q values are precomputed when `precompute_target`.
        precompute_target: compute target values ahead (worth it with hard target copies;
            a Polyak target changes at every update).
        memory_format: memory format of the observation tensors (channels_last for CNNs).
        threads: torch threads of the prefetch thread.
        demonstrations: the demonstration buffer (None: every row is the agent's).
        demo_rows: rows of each batch drawn from `demonstrations`.
    """

    def __init__(
        self,
        context: RuntimeContext[Any],
        replay_buffer: Callable[[], ReplayBuffer],
        rng: np.random.Generator,
        batch_size: int,
        target: TargetNetwork,
        *,
        precompute_target: bool,
        memory_format: torch.memory_format = torch.contiguous_format,
        threads: int = 1,
        demonstrations: ReplayBuffer | None = None,
        demo_rows: int = 0,
    ) -> None:
        if not 0 <= demo_rows <= batch_size or (demo_rows and demonstrations is None):
            raise ValueError(
                f"demo_rows {demo_rows} needs a demonstration buffer and at most "
                f"batch_size {batch_size} rows"
            )
        self.context = context
        self._replay_buffer = replay_buffer
        self.rng = rng
        self.batch_size = batch_size
        self.target = target
        self.precompute_target = precompute_target
        self.memory_format = memory_format
        self.threads = threads
        self.demonstrations = demonstrations
        self.demo_rows = demo_rows
        self._cond = threading.Condition()
        self._requested: float | None = None  # the beta of the requested batch
        self._busy = False
        self._ready: PreparedBatch | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._jobs: deque[tuple[Callable[[], Any], Future[Any]]] = deque()

    # -- the learner's side ----------------------------------------------------------------

    def start(self) -> None:
        """Start the prefetch thread."""
        if self._thread is None:
            self._closed = False
            self._thread = threading.Thread(target=self._run, name="batch-prefetch", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the prefetch thread (a prepared batch is cancelled)."""
        self.cancel()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def request(self, beta: float) -> None:
        """Start preparing the next batch (importance exponent `beta`) on the prefetch
        thread; without a running thread, `take` prepares it instead."""
        with self._cond:
            if self._thread is None or self._closed:
                return
            if self._ready is None and self._requested is None and not self._busy:
                self._requested = beta
                self._cond.notify_all()

    def take(self, beta: float) -> PreparedBatch:
        """The next batch: the prepared one, or one prepared now on the calling thread."""
        with self._cond:
            while self._requested is not None or self._busy:
                self._cond.wait(0.05)
            self._raise_error()
            prepared, self._ready = self._ready, None
        return prepared if prepared is not None else self.prepare(beta)

    def cancel(self) -> None:
        """Drop a prepared batch and rewind the RNG to before it was drawn.

        Waits for a batch in preparation to finish first, so that afterwards neither
        the RNG nor the replay buffer is touched until the next `request`.
        """
        with self._cond:
            self._requested = None
            while self._busy:
                self._cond.wait(0.05)
            if self._ready is not None:
                self.rng.bit_generator.state = self._ready.rng_state_before
                self._ready = None
            self._error = None

    @property
    def running(self) -> bool:
        """Whether the prefetch thread is running."""
        return self._thread is not None and not self._closed

    @property
    def pending(self) -> bool:
        """Whether a batch is requested, in preparation or prepared."""
        with self._cond:
            return self._requested is not None or self._busy or self._ready is not None

    # -- preparing -------------------------------------------------------------------------

    def prepare(self, beta: float) -> PreparedBatch:
        """Sample a batch and prepare it on the calling thread."""
        device = self.context.device
        rng_state = dict(self.rng.bit_generator.state)
        batch = self._sample(beta)

        def images(array: np.ndarray[Any, Any]) -> torch.Tensor:
            tensor = torch.from_numpy(array).to(device)
            if tensor.dim() == 4:
                tensor = tensor.contiguous(memory_format=self.memory_format)
            return tensor

        observations = images(batch.observations)
        next_observations = images(batch.next_observations)
        target_q: torch.Tensor | None = None
        version = -1
        if self.precompute_target:
            target_q, version = self.target.q_values(next_observations)
        return PreparedBatch(
            batch=batch,
            observations=observations,
            actions=torch.from_numpy(batch.actions).to(device),
            returns=torch.from_numpy(batch.returns).to(device),
            discounts=torch.from_numpy(batch.discounts).to(device),
            next_observations=next_observations,
            weights=torch.from_numpy(batch.weights).to(device),
            target_q=target_q,
            target_version=version,
            rng_state_before=rng_state,
            demo_rows=self.demo_rows,
        )

    def _sample(self, beta: float) -> ReplayBatch:
        if not self.demo_rows:
            return self._replay_buffer().sample(self.batch_size, self.rng, beta=beta)
        assert self.demonstrations is not None
        agent_rows = self.batch_size - self.demo_rows
        agent = (
            self._replay_buffer().sample(agent_rows, self.rng, beta=beta) if agent_rows else None
        )
        demo = self.demonstrations.sample(self.demo_rows, self.rng)
        return demo if agent is None else join_batches(agent, demo)

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError(f"batch prefetch failed: {error}") from error

    def submit(self, job: Callable[[], T]) -> Future[T]:
        """Run `job` on the prefetch thread (before a batch requested later); without a
        running thread, run it now. The learner uses it for work that can overlap its own
        forward pass, such as double DQN's online Q values of the next observations."""
        future: Future[T] = Future()
        with self._cond:
            if self._thread is not None and not self._closed:
                self._jobs.append((job, future))
                self._cond.notify_all()
                return future
        try:
            future.set_result(job())
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def _run_jobs(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    return
                job, future = self._jobs.popleft()
            try:
                future.set_result(job())
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)

    def _run(self) -> None:
        self.context.enter_thread(self.threads)
        while True:
            self._run_jobs()
            with self._cond:
                while self._requested is None and not self._jobs and not self._closed:
                    self._cond.wait(0.1)
                if self._jobs and not self._closed:
                    continue
                beta = self._requested
                if self._closed or beta is None:
                    for _, future in self._jobs:
                        future.cancel()
                    self._jobs.clear()
                    return
                self._requested = None
                self._busy = True
            prepared: PreparedBatch | None = None
            error: BaseException | None = None
            try:
                prepared = self.prepare(beta)
            except BaseException as exc:  # handed to the learner by take()
                error = exc
            with self._cond:
                self._busy = False
                self._ready, self._error = prepared, error
                self._cond.notify_all()
