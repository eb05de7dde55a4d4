"""Shrink and perturb (`learner.shrink_perturb`, as BBF uses it): the arithmetic on a real
Q-network, the setting's checks, and a real DQN run that applies it (a distill run's:
tests/test_distill.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.dqn.model import DQNModel
from oakemu_rl.experiments import DQNExperiment
from oakemu_rl.runtime.config_base import ConfigError
from oakemu_rl.runtime.shrink_perturb import shrink_and_perturb


def _model() -> DQNModel:
    config = DQNExperimentConfiguration()
    return DQNExperiment.build_model(config, (2, 23, 32), 4)  # type: ignore[return-value]


def test_each_weight_moves_the_given_share_towards_a_fresh_initialisation() -> None:
    model = _model()
    before = copy.deepcopy(model.state_dict())
    shrink_and_perturb(model, 1.0, seed=5)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, before[name], rtol=0, atol=0)
    reset = _model()
    shrink_and_perturb(reset, 0.0, seed=5)
    fresh = reset.state_dict()
    again = _model()
    shrink_and_perturb(again, 0.0, seed=5)  # the same seed draws the same initialisation
    for name, tensor in again.state_dict().items():
        torch.testing.assert_close(tensor, fresh[name], rtol=0, atol=0)
    shrink_and_perturb(model, 0.25, seed=5)
    moved = 0
    for name, weight in model.named_parameters():
        expected = 0.25 * before[name] + 0.75 * fresh[name]
        torch.testing.assert_close(weight.detach(), expected)
        moved += not torch.equal(weight.detach(), before[name])
    assert moved == len(list(model.parameters()))
    with pytest.raises(ValueError, match=r"shrink 1\.5 is not in"):
        shrink_and_perturb(model, 1.5, seed=0)


def test_a_shrink_without_a_period_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"set shrink_perturb\.every_updates too"):
        DQNExperimentConfiguration.from_dict({"learner": {"shrink_perturb": {"shrink": 0.8}}})
    # A saved configuration lists every setting, the default shrink too: not a choice.
    saved = yaml.safe_load(DQNExperimentConfiguration().to_yaml())
    assert DQNExperimentConfiguration.from_dict(saved).learner.shrink_perturb.every_updates is None


def test_a_dqn_run_shrinks_its_network_on_schedule(tmp_path: Path) -> None:
    config = DQNExperimentConfiguration.from_dict(
        {
            "game": "catch",
            "total_steps": 400,
            "torch_threads": 1,
            "env": {"num_envs": 2, "backend": "inline"},
            "learner": {
                "learning_starts": 64,
                "batch_size": 16,
                "log_every_updates": 16,
                "shrink_perturb": {"every_updates": 16, "shrink": 0.5},
            },
            "tester": {"enabled": False},
            "logging": {"console": False, "tensorboard": False},
        }
    )
    experiment = DQNExperiment(config, tmp_path / "run", console=False)
    experiment.run()
    updates = experiment.learner.updates
    assert updates >= 64
    logged = dict(experiment.memory.history["train/shrink_perturbs"])
    assert max(logged.values()) == updates // 16 >= 4
    for weight in experiment.learner_model.parameters():
        assert bool(torch.isfinite(weight).all())
