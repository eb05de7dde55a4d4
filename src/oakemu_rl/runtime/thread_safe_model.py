"""ThreadSafeModel: the learner model shared with actors through a version counter."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch
from torch import nn

M = TypeVar("M", bound=nn.Module)


@dataclass
class _CopyPlan:
    """The tensors `copy_to` copies, resolved once per target model."""

    target: nn.Module
    destination: list[torch.Tensor]
    source: list[torch.Tensor]
    first_pointers: tuple[int, int]

    @staticmethod
    def _first_pointer(model: nn.Module) -> int:
        first = next(model.parameters(), None)
        return -1 if first is None else first.data_ptr()

    @classmethod
    def resolve(cls, target: nn.Module, model: nn.Module) -> _CopyPlan:
        source = model.state_dict(keep_vars=True)
        destination = target.state_dict(keep_vars=True)
        if source.keys() != destination.keys():
            raise ValueError("copy_to: the target model's weights differ from the model's")
        return cls(
            target,
            [destination[name].data for name in source],
            [source[name].data for name in source],
            (cls._first_pointer(target), cls._first_pointer(model)),
        )

    def valid(self, target: nn.Module, model: nn.Module) -> bool:
        """False when either model's tensors were replaced (say by `.to(device)`)."""
        return self.target is target and self.first_pointers == (
            self._first_pointer(target),
            self._first_pointer(model),
        )


class ThreadSafeModel(Generic[M]):
    """Wraps the learner model. The learner changes weights inside `update()`, which
    publishes a new version on exit; actors call `copy_to`, which copies the weights
    only when a newer version exists than the one they hold.

    The learner may read its own model (forward, backward) without the lock: only
    the weight change itself (the optimizer step) is done under it, so an actor
    never copies half-updated weights.
    """

    def __init__(self, model: M) -> None:
        self.model = model
        self._lock = threading.RLock()
        self._version = 0
        self._copy_plans: dict[int, _CopyPlan] = {}

    @property
    def version(self) -> int:
        """The number of published updates."""
        return self._version

    @contextmanager
    def update(self) -> Iterator[M]:
        """Change the weights under the lock; publishes a new version on exit."""
        with self._lock:
            yield self.model
            self._version += 1

    @contextmanager
    def read(self) -> Iterator[M]:
        """Hold the lock to read consistent weights (for example for a checkpoint)."""
        with self._lock:
            yield self.model

    def publish(self) -> int:
        """Mark the current weights as a new version (after a change made elsewhere)."""
        with self._lock:
            self._version += 1
            return self._version

    def copy_to(self, target: nn.Module, known_version: int) -> int | None:
        """Copy the weights into `target` if a version newer than `known_version` exists.

        Returns the version copied, or None when `target` is already current.
        """
        if self._version <= known_version:
            return None
        plan = self._copy_plans.get(id(target))
        if plan is None or not plan.valid(target, self.model):
            plan = _CopyPlan.resolve(target, self.model)
            self._copy_plans[id(target)] = plan
        with self._lock, torch.no_grad():
            for destination, source in zip(plan.destination, plan.source, strict=True):
                destination.copy_(source)
            return self._version

    def state_dict(self) -> dict[str, Any]:
        """A consistent copy of the weights."""
        with self._lock:
            return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def load_state_dict(self, state: dict[str, Any], version: int | None = None) -> None:
        """Replace the weights and publish them (as `version`, when given)."""
        with self._lock:
            self.model.load_state_dict(state)
            self._version = self._version + 1 if version is None else version
