"""The inline backend: every env in the caller's process, for debugging and tests.

Commands queue up as they are submitted and run, in submission order, when results
are asked for; an env that raises raises `MultiEnvError` at once (there is no worker
to restart).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..worker import OP_SAVE, Command, EnvFault, EnvHost
from .base import EnvPool, MultiEnvError, PoolSettings, Resources

__all__ = ["InlinePool"]


def _fault_error(fault: EnvFault) -> MultiEnvError:
    return MultiEnvError(
        f"env {fault.env_id} raised in {fault.phase}:\n{fault.formatted}",
        [fault.env_id],
        worker_traceback=fault.formatted,
    )


class InlinePool(EnvPool):
    """Consumes commands into a queue; produces their results when polled."""

    def __init__(self, settings: PoolSettings, resources: Resources) -> None:
        super().__init__(settings, resources, "local")
        self._queue: deque[Command] = deque()
        try:
            self._host = EnvHost(
                settings.factory,
                settings.first_seeds(range(self.num_envs), 0),
                self.slots,
                settings.auto_reset,
            )
        except EnvFault as fault:
            resources.release()
            raise MultiEnvError(
                f"env {fault.env_id} could not be built:\n{fault.formatted}",
                [fault.env_id],
                worker_traceback=fault.formatted,
            ) from None
        resources.on_release.append(self._host.close)

    @property
    def result_queue_depth(self) -> int:
        return len(self.ready) + len(self._queue)

    def _send(self, env_id: int, command: Command) -> None:
        self._queue.append(command)

    def _collect(self, max_results: int | None, timeout: float | None) -> None:
        queue = self._queue
        while queue and (max_results is None or len(self.ready) < max_results):
            command = queue.popleft()
            try:
                result: Any = self._host.execute(command)
            except EnvFault as fault:
                self.failure = _fault_error(fault)
                raise self.failure from None
            self._on_result(result)

    def _save(self, env_id: int) -> bytes:
        try:
            reply = self._host.execute((OP_SAVE, env_id, 0, None))
        except EnvFault as fault:
            raise _fault_error(fault) from None
        return bytes(reply[2])
