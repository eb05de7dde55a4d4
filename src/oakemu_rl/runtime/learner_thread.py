"""The thread a learner trains on: started once, joined after the run stops."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod


class LearnerThread(ABC):
    """The lifecycle of a learner's thread, shared by every algorithm's learner.

    `start` starts the thread once (a second call while it exists does nothing), `join`
    waits for it to end and forgets it once it has, so that it can be started again, and
    `running` says whether it is alive. These are what the run loop asks of a learner.

    A subclass calls `super().__init__()` and implements `_run`, the thread's body: it
    returns once the run stops (the context's stop event, or a handshake that ends) and
    reports an exception through `RuntimeContext.report_error` instead of raising it,
    since nothing would see it raised on a daemon thread. `_before_start` is called on
    the caller's thread just before the thread starts, for what must be in place first.
    """

    thread_name = "learner"

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the learner thread (nothing happens while it already exists)."""
        if self._thread is None:
            self._before_start()
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the learner thread to end (after a stop), at most `timeout` seconds."""
        if self._thread is not None:
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self._thread = None

    @property
    def running(self) -> bool:
        """Whether the learner thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def _before_start(self) -> None:  # noqa: B027 - optional hook
        """Called just before the thread starts; does nothing unless overridden."""

    @abstractmethod
    def _run(self) -> None:
        """The thread's body: train until the run stops."""
