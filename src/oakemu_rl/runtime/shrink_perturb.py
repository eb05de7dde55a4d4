"""Shrink and perturb (Ash & Adams 2020), as BBF (Schwarzer et al. 2023) uses it to keep a
network plastic: every weight moves part of the way towards a fresh initialisation of its
layer. DQN's learner and distill's use it, on the schedule `ShrinkPerturbSettings` sets."""

from __future__ import annotations

import copy
from typing import Any, Self

import torch
from pydantic import Field, model_validator
from torch import nn

from .config_base import ConfigSection
from .thread_safe_model import ThreadSafeModel

__all__ = ["ShrinkPerturbSettings", "shrink_and_perturb", "shrink_if_due"]


class ShrinkPerturbSettings(ConfigSection):
    """Shrink and perturb (Ash & Adams 2020; BBF, Schwarzer et al. 2023): every so many
    updates the learner's network moves part of the way to a fresh initialisation, so that
    a network that has fitted early data keeps its plasticity."""

    every_updates: int | None = Field(
        None, ge=1, description="Learner updates between two shrinks (null: never)."
    )
    shrink: float = Field(
        0.5,
        ge=0,
        le=1,
        description="The share of each weight kept: w <- shrink * w + (1 - shrink) * w0, w0 "
        "a fresh initialisation of the layer (1: no change; 0: a full reset).",
    )

    @model_validator(mode="after")
    def _used(self) -> Self:
        # A saved configuration lists every setting: only a changed one is a choice.
        default = type(self).model_fields["shrink"].default
        if self.every_updates is None and self.shrink != default:
            raise ValueError(
                "shrink_perturb.shrink: set shrink_perturb.every_updates too (shrink and "
                "perturb is off without it)"
            )
        return self

    def due(self, updates: int) -> bool:
        """Whether the learner shrinks its network after its `updates`-th update."""
        return self.every_updates is not None and updates % self.every_updates == 0

    def count(self, updates: int) -> int | None:
        """Shrinks made in `updates` updates (None when off): `train/shrink_perturbs`."""
        return None if self.every_updates is None else updates // self.every_updates

    @staticmethod
    def seed(run_seed: int, updates: int) -> int:
        """The seed of the fresh initialisation at update `updates` of a run."""
        return run_seed * 1_000_003 + updates


@torch.no_grad()
def shrink_and_perturb(model: nn.Module, shrink: float, seed: int) -> None:
    """w <- shrink * w + (1 - shrink) * w0 for every parameter of `model`, where w0 comes
    from a copy of the model whose layers are initialised afresh (`reset_parameters`,
    seeded by `seed` so that a run is reproducible)."""
    if not 0.0 <= shrink <= 1.0:
        raise ValueError(f"shrink {shrink} is not in [0, 1]")
    fresh = copy.deepcopy(model)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for module in fresh.modules():
            reset = getattr(module, "reset_parameters", None)
            if callable(reset):
                reset()
    for weight, initial in zip(model.parameters(), fresh.parameters(), strict=True):
        weight.mul_(shrink).add_(initial, alpha=1.0 - shrink)


def shrink_if_due(
    settings: ShrinkPerturbSettings,
    learner_model: ThreadSafeModel[Any],
    updates: int,
    run_seed: int,
) -> None:
    """After a learner's `updates`-th update: shrink its network when `settings` says so
    (as one published update of `learner_model`), from a fresh initialisation seeded by
    the run's seed and the update count."""
    if settings.due(updates):
        with learner_model.update():
            seed = settings.seed(run_seed, updates)
            shrink_and_perturb(learner_model.model, settings.shrink, seed)
