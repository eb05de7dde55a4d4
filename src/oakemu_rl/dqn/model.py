"""DQNModel: a torso (a CNN of `runtime.torsos`, or an MLP) and a dueling, noisy-or-not Q head."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..runtime.torsos import CNN_TORSOS, TorsoName, cnn_torso, resolve_torso
from .noisy import NoisyLinear


def _mlp(inputs: int, hidden: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Flatten()]
    size = inputs
    for width in hidden:
        layers += [nn.Linear(size, width), nn.ReLU()]
        size = width
    return nn.Sequential(*layers)


class DQNModel(nn.Module):
    """Maps observations to one Q-value per action.

    Observations are channels-first images (C, H, W) or vectors. uint8 inputs are
    scaled to [0, 1] inside the model, so the actor and the replay buffer keep uint8.

    Args:
        observation_shape: shape of one observation (no batch dimension).
        num_actions: number of actions.
        torso: 'small_cnn', 'nature_cnn', 'cell_cnn', 'mlp' or 'auto' (small_cnn for
            3-D shapes, else mlp); see `oakemu_rl.runtime.torsos`.
        mlp_hidden: hidden sizes of the MLP torso.
        head_hidden: hidden units of the head (0: a linear head).
        dueling: separate value and advantage streams.
        noisy: NoisyNet layers in the head.
        noisy_sigma0: initial noise scale.
    """

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        *,
        torso: TorsoName = "auto",
        mlp_hidden: Sequence[int] = (128, 128),
        head_hidden: int = 256,
        dueling: bool = True,
        noisy: bool = False,
        noisy_sigma0: float = 0.5,
    ) -> None:
        super().__init__()
        shape = tuple(int(s) for s in observation_shape)
        torso = resolve_torso(torso, shape)
        self.observation_shape = shape
        self.num_actions = num_actions
        self.torso_name = torso
        self.dueling = dueling
        self.noisy = noisy
        if torso in CNN_TORSOS:
            self.torso = cnn_torso(torso, shape[0])
        else:
            inputs = 1
            for s in shape:
                inputs *= s
            self.torso = _mlp(inputs, mlp_hidden)
        with torch.no_grad():
            features = int(self.torso(torch.zeros(1, *shape)).shape[1])

        def linear(i: int, o: int) -> nn.Module:
            return NoisyLinear(i, o, noisy_sigma0) if noisy else nn.Linear(i, o)

        def stream(outputs: int) -> nn.Sequential:
            if head_hidden > 0:
                return nn.Sequential(
                    linear(features, head_hidden), nn.ReLU(), linear(head_hidden, outputs)
                )
            return nn.Sequential(linear(features, outputs))

        self.advantage = stream(num_actions)
        self.value = stream(1) if dueling else None
        if torso in CNN_TORSOS:
            # oneDNN's convolutions (forward and backward) are faster on NHWC tensors,
            # most of all a first layer with few input channels. Flattening still
            # follows the (C, H, W) order, so the weights mean what they always meant.
            self.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    @property
    def input_memory_format(self) -> torch.memory_format:
        """The memory format the torso reads images in (callers may convert ahead)."""
        if self.torso_name in CNN_TORSOS:
            return torch.channels_last
        return torch.contiguous_format

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        if observations.dim() == 4 and self.torso_name in CNN_TORSOS:
            observations = observations.contiguous(memory_format=torch.channels_last)
        x = observations.float()
        if observations.dtype == torch.uint8:
            x = x / 255.0
        features = self.torso(x)
        advantage: torch.Tensor = self.advantage(features)
        if self.value is None:
            return advantage
        value: torch.Tensor = self.value(features)
        return value + advantage - advantage.mean(dim=1, keepdim=True)

    def reset_noise(self) -> None:
        """Draw new noise in every NoisyNet layer (no-op without them)."""
        for module in self.modules():
            if isinstance(module, NoisyLinear):
                module.reset_noise()
