"""Torch set-up of an experiment: Adam is fused."""

from __future__ import annotations

import torch

from oakemu_rl.experiments.torch_setup import build_optimizer


def test_optimizer_is_fused_adam_and_steps() -> None:
    model = torch.nn.Linear(4, 2)
    optimizer = build_optimizer(model, 1e-2, 1e-5)
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.defaults["fused"] is True
    before = model.weight.detach().clone()
    model(torch.ones(3, 4)).sum().backward()
    optimizer.step()
    assert not torch.equal(before, model.weight)
