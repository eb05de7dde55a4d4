"""RolloutHandshake: hands a full rollout from the actor to the learner and back.

::

    actor                                   learner
    fill the buffer                         wait_for_rollout()  -> True
    signal_full(); wait_for_release()       compute GAE, train, publish weights
                                   <------  release()
    (returns True) reset, fill again        wait_for_rollout() ...

The actor may also hand over a rollout and go on collecting the next one into
another buffer while the learner trains (`ppo.overlap_collection`): it then calls
`signal_full(buffer)` without waiting, and `wait_for_release()` only before it hands
over the next one. The learner trains on `rollout`, the buffer last handed over.

Either side may stop at any time: `stop()` (or the shared stop event) wakes every
waiter, whose wait then returns False, and later waits return False at once. A
`release()` after a stop is harmless. Neither side can therefore be left waiting
for the other: a stop during a fill frees the learner, a stop during training frees
the actor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["RolloutHandshake"]


class RolloutHandshake:
    """Synchronises rollout hand-off between the actor and the learner.

    Args:
        stop_event: an event (typically the run's) that also stops the handshake.
        poll_interval: how often waiters look at `stop_event`, in seconds.
        wait_at: called with the env step a rollout ends at; True means an actor that
            overlaps collection with training must still wait for that rollout's release
            (the experiment's checkpoint steps, so that every checkpoint is consistent).
    """

    def __init__(
        self,
        stop_event: threading.Event | None = None,
        poll_interval: float = 0.05,
        wait_at: Callable[[int], bool] | None = None,
    ) -> None:
        self._wait_at = wait_at
        self._cond = threading.Condition()
        self._stop_event = stop_event
        self._poll = poll_interval
        self._stopped = False
        self._submitted = 0
        self._taken = 0
        self._released = 0
        self._rollout: object | None = None
        self.actor_wait_s = 0.0
        self.learner_wait_s = 0.0

    @property
    def stopped(self) -> bool:
        """Whether the handshake (or the run) has been stopped."""
        return self._stopped or (self._stop_event is not None and self._stop_event.is_set())

    @property
    def rollouts(self) -> int:
        """Rollouts handed to the learner so far."""
        return self._submitted

    @property
    def releases(self) -> int:
        """Rollouts the learner has released so far."""
        return self._released

    @property
    def rollout(self) -> object | None:
        """The buffer of the rollout last handed over (None when `signal_full` named none)."""
        return self._rollout

    @property
    def training(self) -> bool:
        """Whether a rollout has been handed over and not released yet."""
        with self._cond:
            return self._released < self._submitted

    def stop(self) -> None:
        """Stop both sides: every wait returns False from now on."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _wait(self, ready: str, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self.stopped:
                    self._cond.notify_all()
                    return False
                if ready == "rollout" and self._submitted > self._taken:
                    self._taken = self._submitted
                    return True
                if ready == "release" and self._released >= self._submitted:
                    return True
                wait = self._poll
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    wait = min(wait, remaining)
                self._cond.wait(wait)

    # -- actor side ---------------------------------------------------------------------

    def must_wait(self, step: int) -> bool:
        """Whether an overlapping actor must wait for the release of the rollout that ends
        at env step `step`."""
        return self._wait_at is not None and self._wait_at(step)

    def signal_full(self, rollout: object | None = None) -> None:
        """The buffer is full: hand it (`rollout`, or the learner's own buffer) to the learner."""
        with self._cond:
            if self._released < self._submitted:
                raise RuntimeError("signal_full: the previous rollout has not been released")
            self._rollout = rollout
            self._submitted += 1
            self._cond.notify_all()

    def wait_for_release(self, timeout: float | None = None) -> bool:
        """Wait until the learner releases the rollout; False when stopped (or timed out)."""
        start = time.monotonic()
        try:
            return self._wait("release", timeout)
        finally:
            self.actor_wait_s += time.monotonic() - start

    def submit_and_wait(self, timeout: float | None = None, rollout: object | None = None) -> bool:
        """`signal_full` then `wait_for_release`."""
        self.signal_full(rollout)
        return self.wait_for_release(timeout)

    # -- learner side -------------------------------------------------------------------

    def wait_for_rollout(self, timeout: float | None = None) -> bool:
        """Wait for a full rollout; True when one is ready, False when stopped (or timed out)."""
        start = time.monotonic()
        try:
            return self._wait("rollout", timeout)
        finally:
            self.learner_wait_s += time.monotonic() - start

    def release(self) -> None:
        """Give the rollout back to the actor (harmless after a stop)."""
        with self._cond:
            self._released = self._submitted
            self._cond.notify_all()
