"""Shrink and perturb (Ash & Adams 2020), as BBF (Schwarzer et al. 2023) uses it to keep a
value network plastic: every weight moves part of the way towards a fresh initialisation
of its layer."""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = ["shrink_and_perturb"]


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
