"""DQNModel: a torso (small CNN, Nature CNN or MLP) and a (dueling, optionally noisy) Q head."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from .noisy import NoisyLinear

TorsoName = Literal["auto", "small_cnn", "nature_cnn", "mlp"]


def _small_cnn(channels: int) -> nn.Sequential:
    # Three stride-2 convolutions: keeps the fine positions small games need, and cheap
    # enough on 2 CPU cores at 32x32 to 48x48.
    return nn.Sequential(
        nn.Conv2d(channels, 16, kernel_size=5, stride=2, padding=2),
        nn.ReLU(),
        nn.Conv2d(16, 32, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Flatten(),
    )


def _nature_cnn(channels: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(channels, 32, kernel_size=8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, kernel_size=4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, kernel_size=3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
    )


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
        torso: 'small_cnn', 'nature_cnn', 'mlp' or 'auto' (CNN for 3-D shapes, else MLP).
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
        if torso == "auto":
            torso = "small_cnn" if len(shape) == 3 else "mlp"
        if torso in ("small_cnn", "nature_cnn") and len(shape) != 3:
            raise ValueError(f"torso {torso!r} needs (C, H, W) observations; got shape {shape}")
        smallest = {"small_cnn": 8, "nature_cnn": 36}.get(torso, 0)
        if len(shape) == 3 and min(shape[1:]) < smallest:
            raise ValueError(
                f"{torso} needs observations of at least {smallest}x{smallest}; got {shape}"
            )
        self.observation_shape = shape
        self.num_actions = num_actions
        self.torso_name = torso
        self.dueling = dueling
        self.noisy = noisy
        if torso == "small_cnn":
            self.torso = _small_cnn(shape[0])
        elif torso == "nature_cnn":
            self.torso = _nature_cnn(shape[0])
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
        if torso in ("small_cnn", "nature_cnn"):
            # oneDNN's convolutions (forward and backward) are faster on NHWC tensors,
            # most of all a first layer with few input channels. Flattening still
            # follows the (C, H, W) order, so the weights mean what they always meant.
            self.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    @property
    def input_memory_format(self) -> torch.memory_format:
        """The memory format the torso reads images in (callers may convert ahead)."""
        if self.torso_name in ("small_cnn", "nature_cnn"):
            return torch.channels_last
        return torch.contiguous_format

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        if observations.dim() == 4 and self.torso_name in ("small_cnn", "nature_cnn"):
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
