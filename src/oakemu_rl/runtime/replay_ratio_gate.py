"""ReplayRatioGate: holds the learner's updates at a fixed ratio to the actor's steps."""

from __future__ import annotations

import threading
import time


class ReplayRatioGate:
    """Holds learner updates at `ratio` per env step after `learning_starts` steps.

    DQN counts env steps (its replay ratio); distill counts labelled states (its
    `updates_per_step`). The actor reports its steps (`set_env_steps`), the learner its updates
    (`record_update`). The learner waits while it is at or ahead of
    `ratio * (steps - learning_starts)` (`learner_wait`); while a learner runs
    (`hold_actor`), the actor waits while the learner is more than `max_lag` updates
    behind (`actor_wait`). With no learner running the actor is never held back.
    """

    def __init__(self, ratio: float, learning_starts: int, max_lag: int) -> None:
        self.ratio = ratio
        self.learning_starts = learning_starts
        self.max_lag = max_lag
        self._cond = threading.Condition()
        self._env_steps = 0
        self._updates = 0
        self.base_updates = 0
        self._holding = False
        self.actor_wait_s = 0.0

    def target_updates(self, env_steps: int) -> int:
        """Updates due after `env_steps` env steps."""
        return self.base_updates + max(0, int((env_steps - self.learning_starts) * self.ratio))

    def lag(self, env_steps: int) -> int:
        """How many updates the learner is behind after `env_steps` env steps."""
        return self.target_updates(env_steps) - self._updates

    def rebase(self, updates: int, learning_starts: int) -> None:
        """From now on: `updates` done, and the next ones due from `learning_starts` on."""
        with self._cond:
            self.base_updates = updates
            self._updates = updates
            self.learning_starts = learning_starts
            self._cond.notify_all()

    @property
    def env_steps(self) -> int:
        return self._env_steps

    @property
    def updates(self) -> int:
        return self._updates

    def set_env_steps(self, steps: int) -> None:
        with self._cond:
            self._env_steps = steps
            self._cond.notify_all()

    def set_updates(self, updates: int) -> None:
        with self._cond:
            self._updates = updates
            self._cond.notify_all()

    def learner_wait(self, stop: threading.Event, timeout: float = 0.1) -> bool:
        """Wait until an update is due; False if `stop` was set or `timeout` passed first."""
        with self._cond:
            if self.lag(self._env_steps) > 0:
                return True
            if stop.is_set():
                return False
            self._cond.wait(timeout)
            return self.lag(self._env_steps) > 0

    def record_update(self) -> None:
        with self._cond:
            self._updates += 1
            self._cond.notify_all()

    def hold_actor(self, holding: bool) -> None:
        """Start (a learner started) or stop (it stopped) holding the actor to the ratio."""
        with self._cond:
            self._holding = holding
            self._cond.notify_all()

    def actor_wait(self, stop: threading.Event) -> None:
        """Block the actor while a running learner lags more than `max_lag` updates."""
        with self._cond:
            start = None
            while self._holding and not stop.is_set() and self.lag(self._env_steps) > self.max_lag:
                start = start or time.monotonic()
                self._cond.wait(0.05)
            if start is not None:
                self.actor_wait_s += time.monotonic() - start

    def wait_until_caught_up(self, stop: threading.Event, timeout: float = 60.0) -> bool:
        """Wait until the learner has made every update due at the current env steps."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.lag(self._env_steps) > 0:
                remaining = deadline - time.monotonic()
                if stop.is_set() or not self._holding or remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.05))
        return True
