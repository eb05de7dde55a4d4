"""Process and torch set-up: the training program keeps freed memory (the library does not
touch the allocator), Adam is fused."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from oakemu_rl.experiments.torch_setup import build_optimizer

# Runs 30 forward and backward passes of the DQN network on a batch of 64, as the
# learner does, and prints the page faults they took, in a fresh process: left as it is
# ("default"), or set up as `oakemu-rl train` sets up its own ("program").
_FAULTS = """
import resource, sys, torch
from oakemu_rl.dqn.model import DQNModel
if sys.argv[1] == "program":
    from oakemu_rl.cli.process_setup import keep_freed_memory
    assert keep_freed_memory()
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

# Counts the calls to glibc's mallopt through ctypes while a short DQN run is built and
# run with the library ("library"), or while the program's set-up runs ("program").
_MALLOPT_CALLS = """
import ctypes, sys, tempfile
calls = []
class Spy(ctypes.CDLL):
    def __getattr__(self, name):
        if name == "mallopt":
            calls.append(name)
        return super().__getattr__(name)
ctypes.CDLL = Spy
if sys.argv[1] == "program":
    from oakemu_rl.cli.process_setup import keep_freed_memory
    keep_freed_memory()
else:
    from oakemu_rl.dqn.config import DQNExperimentConfiguration
    from oakemu_rl.experiments import DQNExperiment
    config = DQNExperimentConfiguration.from_dict({
        "game": "gym:CartPole-v1", "total_steps": 300, "env": {"num_envs": 2, "backend": "inline"},
        "model": {"mlp_hidden": [16], "head_hidden": 0},
        "learner": {"learning_starts": 50, "batch_size": 8}, "tester": {"enabled": False},
        "logging": {"console": False, "tensorboard": False}})
    DQNExperiment(config, tempfile.mkdtemp() + "/run", print_fn=lambda _: None).run()
print(len(calls))
"""


def _run(script: str, mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", script, mode], capture_output=True, text=True, check=True
    ).stdout
    return int(out.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_training_program_keeps_freed_memory() -> None:
    default, program = _run(_FAULTS, "default"), _run(_FAULTS, "program")
    # By default the big activations and gradients are fresh mmaps, faulted in page
    # by page at every update (about 400 faults an update measured). With the program's
    # set-up they are reused: 15-20 times fewer faults (one CI run: 9,409 against 512).
    assert default > 30 * 100, default
    assert program < default / 10, (default, program)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_library_leaves_the_allocator_alone() -> None:
    assert _run(_MALLOPT_CALLS, "program") > 0  # the spy sees the program's calls
    assert _run(_MALLOPT_CALLS, "library") == 0  # a whole run made through the library: none


def test_optimizer_is_fused_adam_and_steps() -> None:
    model = torch.nn.Linear(4, 2)
    optimizer = build_optimizer(model, 1e-2, 1e-5)
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.defaults["fused"] is True
    before = model.weight.detach().clone()
    model(torch.ones(3, 4)).sum().backward()
    optimizer.step()
    assert not torch.equal(before, model.weight)
