"""What state adapters need from the runtime pieces of an algorithm."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from .env_lifecycle import ActorRuntimeState

if TYPE_CHECKING:
    from ..trajectories.restart_pool import RestartPool
    from .context import RuntimeContext


class ActorRuntime(Protocol):
    """An actor whose counters, trajectories and restart pool are checkpointed."""

    @property
    def steps(self) -> int: ...

    @property
    def context(self) -> RuntimeContext[Any]: ...

    @property
    def restart_pool(self) -> RestartPool | None: ...

    def runtime_state(self) -> ActorRuntimeState: ...

    def restore_runtime_state(self, state: ActorRuntimeState) -> None: ...


class LearnerRuntime(Protocol):
    """A learner whose counters (and learner-side extras) are checkpointed."""

    @property
    def updates(self) -> int: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any], *, keep_counters: bool = False) -> None: ...

    def hold(self) -> AbstractContextManager[None]: ...


class TesterRuntime(Protocol):
    """A tester; its best result is checkpointed."""

    @property
    def best(self) -> Any: ...
