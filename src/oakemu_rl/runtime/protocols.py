"""What state adapters need from the runtime pieces of an algorithm."""

from __future__ import annotations

from typing import Any, Protocol

from .env_lifecycle import ActorRuntimeState


class ActorRuntime(Protocol):
    """An actor whose counters and trajectories are checkpointed."""

    @property
    def steps(self) -> int: ...

    def runtime_state(self) -> ActorRuntimeState: ...

    def restore_runtime_state(self, state: ActorRuntimeState) -> None: ...


class LearnerRuntime(Protocol):
    """A learner whose counters (and learner-side extras) are checkpointed."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class TesterRuntime(Protocol):
    """A tester; its best result is checkpointed."""

    @property
    def best(self) -> Any: ...
