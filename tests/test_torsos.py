"""The CNN torsos DQN and PPO share: `cell_cnn` for observations whose pixels are cells."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from oakemu_rl.dqn.model import DQNModel
from oakemu_rl.experiments import EXPERIMENTS
from oakemu_rl.ppo.model import PPOModel
from oakemu_rl.runtime.config_base import ConfigError
from oakemu_rl.runtime.torsos import cnn_torso, resolve_torso

# forest_run's attribute observation: 18 planes of 24x32 cells, two frames stacked.
ATTRIBUTES = (36, 24, 32)


def convolutions(module: nn.Module) -> list[nn.Conv2d]:
    return [m for m in module.modules() if isinstance(m, nn.Conv2d)]


def test_cell_cnn_keeps_every_cell_in_its_first_convolution() -> None:
    torso = cnn_torso("cell_cnn", ATTRIBUTES[0])
    first = convolutions(torso)[0]
    assert first.stride == (1, 1) and first.kernel_size == (3, 3)
    # Two objects one cell apart reach different first-layer positions; small_cnn's
    # stride-2 5x5 convolution puts both in the receptive field of one output.
    assert convolutions(cnn_torso("small_cnn", ATTRIBUTES[0]))[0].stride == (2, 2)
    assert torso(torch.zeros(1, *ATTRIBUTES)).shape == (1, 64 * 6 * 8)


@pytest.mark.parametrize("model_type", [DQNModel, PPOModel])
def test_both_networks_build_cell_cnn_and_choose_an_action_per_state(model_type: type) -> None:
    torch.manual_seed(0)
    model = model_type(ATTRIBUTES, 6, torso="cell_cnn")
    observations = torch.randint(0, 2, (5, *ATTRIBUTES), dtype=torch.uint8) * 255
    assert model(observations).shape == (5, 6)
    assert model.torso_name == "cell_cnn"
    # The same convolutions, under the names `init_from` maps between the two networks.
    dqn_names = {n for n, _ in DQNModel(ATTRIBUTES, 6, torso="cell_cnn").named_parameters()}
    ppo_names = {n for n, _ in PPOModel(ATTRIBUTES, 6, torso="cell_cnn").named_parameters()}
    conv_names = {n.replace("torso.0.", "torso.") for n in ppo_names if n.startswith("torso.0.")}
    assert conv_names <= dqn_names


def test_a_torso_that_cannot_take_the_observation_is_refused_with_the_shape() -> None:
    with pytest.raises(ValueError, match=r"cell_cnn.*\(C, H, W\).*\(8,\)"):
        resolve_torso("cell_cnn", (8,))
    with pytest.raises(ValueError, match=r"cell_cnn needs observations of at least 4x4; got"):
        PPOModel((2, 3, 32), 3, torso="cell_cnn")
    assert resolve_torso("auto", ATTRIBUTES) == "small_cnn"
    assert resolve_torso("auto", (8,)) == "mlp"


@pytest.mark.parametrize("algo", ["dqn", "ppo", "distill"])
def test_every_algorithm_takes_cell_cnn_and_refuses_an_unknown_torso(algo: str) -> None:
    config_type = EXPERIMENTS[algo].config_type
    assert config_type.from_dict({"model": {"torso": "cell_cnn"}}).model.torso == "cell_cnn"
    with pytest.raises(ConfigError, match=r"model\.torso.*cell_cnn"):
        config_type.from_dict({"model": {"torso": "cell-cnn"}})
