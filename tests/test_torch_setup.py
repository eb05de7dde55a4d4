"""Process set-up of an experiment: the allocator keeps freed memory, Adam is fused."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from oakemu_rl.experiments.torch_setup import build_optimizer

# Runs 30 forward and backward passes of the DQN network on a batch of 64, as the
# learner does, and prints the page faults they took.
_FAULTS = """
import resource, sys, torch
from oakemu_rl.dqn.model import DQNModel
from oakemu_rl.experiments.torch_setup import retain_freed_memory
if sys.argv[1] == "retain":
    assert retain_freed_memory()
torch.set_num_threads(1)
model = DQNModel((2, 32, 32), 3, torso="small_cnn")
obs = torch.randint(0, 255, (64, 2, 32, 32), dtype=torch.uint8)
def update():
    model.zero_grad(set_to_none=True)
    model(obs).sum().backward()
for _ in range(5):
    update()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(30):
    update()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, check=True
    ).stdout
    return int(out.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_retained_memory_saves_the_page_faults_of_each_new_big_tensor() -> None:
    default, retained = _faults("default"), _faults("retain")
    # By default the big activations and gradients are fresh mmaps, faulted in page
    # by page at every update (about 400 faults an update measured).
    assert default > 30 * 100, default
    assert retained < default / 20, (default, retained)


def test_optimizer_is_fused_adam_and_steps() -> None:
    model = torch.nn.Linear(4, 2)
    optimizer = build_optimizer(model, 1e-2, 1e-5)
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.defaults["fused"] is True
    before = model.weight.detach().clone()
    model(torch.ones(3, 4)).sum().backward()
    optimizer.step()
    assert not torch.equal(before, model.weight)
