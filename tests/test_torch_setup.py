"""Process and torch set-up: the training program keeps freed memory (the library does not
touch the allocator), Adam is fused."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from oakemu_rl.experiments.torch_setup import build_optimizer

# Runs 30 forward and backward passes of the DQN network on a batch of 64, as the
# learner does, and prints the page faults they took. "library" builds a DQN run first
# (the library must leave the allocator as it found it); "program" sets the process up
# as `oakemu-rl train` does.
_FAULTS = """
import resource, sys, tempfile, torch
from oakemu_rl.dqn.model import DQNModel
if sys.argv[1] == "program":
    from oakemu_rl.cli.process_setup import keep_freed_memory
    assert keep_freed_memory()
else:
    from oakemu_rl.dqn.config import DQNExperimentConfiguration
    from oakemu_rl.experiments import DQNExperiment
    config = DQNExperimentConfiguration.from_dict({
        "game": "gym:CartPole-v1", "env": {"num_envs": 1, "backend": "inline"},
        "logging": {"console": False, "tensorboard": False}})
    DQNExperiment(config, tempfile.mkdtemp() + "/run", print_fn=lambda _: None).build()
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
def test_the_training_program_keeps_freed_memory_and_the_library_does_not() -> None:
    library, program = _faults("library"), _faults("program")
    # Left alone, the big activations and gradients are fresh mappings, faulted in page
    # by page at many updates (70 to 400 faults an update measured; how many depends on
    # what the process allocated and freed before); kept, a handful.
    assert library > 30 * 50, library
    assert program < 30 * 20 and program < library / 4, (library, program)


def test_optimizer_is_fused_adam_and_steps() -> None:
    model = torch.nn.Linear(4, 2)
    optimizer = build_optimizer(model, 1e-2, 1e-5)
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.defaults["fused"] is True
    before = model.weight.detach().clone()
    model(torch.ones(3, 4)).sum().backward()
    optimizer.step()
    assert not torch.equal(before, model.weight)
