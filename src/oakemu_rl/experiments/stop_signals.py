"""Stop a run cleanly on SIGINT and SIGTERM, however many arrive.

`timeout -s INT`, a terminal's Ctrl-C and a process manager all signal the whole
process group, and an impatient user presses Ctrl-C twice. Python turns each SIGINT
into a KeyboardInterrupt wherever the main thread happens to be, so a second one can
escape the code that joins the threads and writes the final checkpoint. Here the
first two signals only ask the run to stop (it finishes the step, writes the final
checkpoint and the summary); a third SIGINT aborts at once, and says so.

The handlers are installed by the program that owns the process (`oakemu-rl train`)
for the length of one run, and the previous ones are put back afterwards::

    with stop_on_signals(experiment):
        experiment.run()
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, Protocol

__all__ = ["RunAborted", "stop_on_signals"]

ABORT_AT = 3
"""The SIGINT that aborts instead of stopping cleanly."""


class RunAborted(KeyboardInterrupt):
    """The user pressed Ctrl-C a third time: leave now, without a final checkpoint."""


class Stoppable(Protocol):
    def request_stop(self, reason: str) -> None: ...


def _say(text: str) -> None:
    # os.write, not print: a handler may run while the main thread is inside print.
    with contextlib.suppress(OSError):
        os.write(2, f"\n{text}\n".encode())


@contextlib.contextmanager
def stop_on_signals(run: Stoppable, *, restore: bool = True) -> Iterator[None]:
    """SIGINT and SIGTERM ask `run` to stop; the third SIGINT raises KeyboardInterrupt.

    With ``restore=False`` the signals are ignored after the block instead: for a program
    that exits right after the run (the CLI), so that a signal arriving while the
    interpreter shuts down (Python puts its own handlers back to the default then) does not
    kill it with the summary already written and report a failure.
    Does nothing off the main thread (Python delivers signals to the main thread only).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    count = 0

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal count
        count += 1
        name = signal.Signals(signum).name
        if signum == signal.SIGINT and count >= ABORT_AT:
            _say(f"{name} again: aborting without a final checkpoint (the newest one is kept)")
            raise RunAborted
        # request_stop only sets a flag that the run loop reads: safe in a handler.
        run.request_stop(f"stopped by {name}")
        if count == 1:
            _say(
                f"{name}: stopping - finishing the step, writing the final checkpoint and "
                "the summary (press Ctrl-C twice more to abort without them)"
            )
        else:
            _say(f"{name}: still stopping; Ctrl-C once more aborts without a final checkpoint")

    previous: dict[signal.Signals, Any] = {}
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        previous[stop_signal] = signal.signal(stop_signal, handle)
    try:
        yield
    finally:
        for stop_signal, handler in previous.items():
            signal.signal(stop_signal, handler if restore else signal.SIG_IGN)
