"""ReplayWriter: a thread that inserts staged transitions into the replay buffer."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from .replay_buffer import ReplayBuffer, Transition


class ReplayWriter:
    """Inserts batches of transitions into a ReplayBuffer on a dedicated thread.

    `submit` puts a batch on a bounded queue (blocking when it is full, which holds
    back an actor that outruns the writer). `drain` waits until everything submitted
    is in the buffer; `pause`/`resume` stop and restart inserting; `set_buffer`
    reconnects the writer to another buffer.
    """

    def __init__(
        self,
        replay_buffer: ReplayBuffer,
        queue_size: int = 64,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._buffer = replay_buffer
        self._queue: queue.Queue[list[Transition] | None] = queue.Queue(maxsize=queue_size)
        self._resumed = threading.Event()
        self._resumed.set()
        self._pause_lock = threading.Lock()
        self._pauses = 0
        self._thread: threading.Thread | None = None
        self._on_error = on_error
        self._error: BaseException | None = None
        self.inserted = 0

    @property
    def replay_buffer(self) -> ReplayBuffer:
        return self._buffer

    def set_buffer(self, replay_buffer: ReplayBuffer) -> None:
        """Insert into `replay_buffer` from now on (call while drained and paused)."""
        self._buffer = replay_buffer

    @property
    def queue_depth(self) -> int:
        """Batches waiting to be inserted."""
        return self._queue.qsize()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="replay-writer", daemon=True)
            self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, batch: list[Transition]) -> None:
        """Queue a batch for insertion (inserted at once when the thread is not running)."""
        if self._error is not None:
            raise RuntimeError("the replay writer failed") from self._error
        if not batch:
            return
        if self._thread is None:
            self._resumed.wait()
            self._buffer.add_batch(batch)
            self.inserted += len(batch)
            return
        while True:
            try:
                self._queue.put(batch, timeout=0.5)
                return
            except queue.Full:
                if not self.running:
                    raise RuntimeError("the replay writer stopped") from self._error

    def drain(self) -> None:
        """Wait until every submitted batch is in the buffer."""
        if self._thread is not None:
            done = self._queue.all_tasks_done
            with done:
                while self._queue.unfinished_tasks and self.running:
                    done.wait(0.2)
        if self._error is not None:
            raise RuntimeError("the replay writer failed") from self._error

    def pause(self) -> None:
        """Stop inserting (batches stay queued) until `resume`; pauses nest."""
        with self._pause_lock:
            self._pauses += 1
            self._resumed.clear()

    def resume(self) -> None:
        with self._pause_lock:
            self._pauses = max(0, self._pauses - 1)
            if self._pauses == 0:
                self._resumed.set()

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            try:
                if batch is None:
                    return
                self._resumed.wait()
                self._buffer.add_batch(batch)
                self.inserted += len(batch)
            except BaseException as exc:
                self._error = exc
                if self._on_error is not None:
                    self._on_error(exc)
                return
            finally:
                self._queue.task_done()

    def close(self, timeout: float = 10.0) -> None:
        """Insert what is queued, then stop the thread."""
        if self._thread is None:
            return
        self._resumed.set()
        self._queue.put(None)
        self._thread.join(timeout)
        self._thread = None
