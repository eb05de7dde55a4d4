"""The convolutional feature extractors ("torsos") that DQN's and PPO's networks share.

- `small_cnn`: three stride-2 convolutions, cheap on 2 CPU cores for 32x32 to 48x48 screens.
- `nature_cnn`: DQN's Atari network (Mnih et al. 2015), for 84x84 screens.
- `cell_cnn`: for observations whose every pixel is already a whole object, such as the
  attribute grid (one pixel a character cell) or a downscaled screen: its first
  convolution keeps every cell (stride 1), so that a tree one column from the player is
  not averaged into the player's own feature, and it ends at a quarter of the grid with
  64 channels (a 24x32 grid: 6x8x64) rather than `small_cnn`'s eighth with 32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from torch import nn

__all__ = ["CNN_TORSOS", "BuiltTorso", "TorsoName", "cnn_torso", "resolve_torso"]

TorsoName = Literal["auto", "small_cnn", "nature_cnn", "cell_cnn", "mlp"]
BuiltTorso = Literal["small_cnn", "nature_cnn", "cell_cnn", "mlp"]

# (output channels, kernel, stride, padding) of each convolution.
_LAYERS: dict[str, list[tuple[int, int, int, int]]] = {
    "small_cnn": [(16, 5, 2, 2), (32, 3, 2, 1), (32, 3, 2, 1)],
    "nature_cnn": [(32, 8, 4, 0), (64, 4, 2, 0), (64, 3, 1, 0)],
    "cell_cnn": [(32, 3, 1, 1), (64, 3, 2, 1), (64, 3, 2, 1)],
}
# The smallest height and width each accepts: smaller inputs leave it no feature map
# worth the name (nature_cnn's valid convolutions need 36).
_SMALLEST = {"small_cnn": 8, "nature_cnn": 36, "cell_cnn": 4}

#: The torsos made of convolutions (they take (C, H, W) observations).
CNN_TORSOS: frozenset[str] = frozenset(_LAYERS)


def resolve_torso(torso: TorsoName, shape: Sequence[int]) -> BuiltTorso:
    """The torso to build for observations of `shape` (`auto`: `small_cnn` for images,
    `mlp` for vectors); a CNN for a shape it cannot take raises ValueError."""
    if torso == "auto":
        return "small_cnn" if len(shape) == 3 else "mlp"
    if torso in CNN_TORSOS:
        if len(shape) != 3:
            raise ValueError(f"torso {torso!r} needs (C, H, W) observations; got shape {shape}")
        smallest = _SMALLEST[torso]
        if min(shape[1:]) < smallest:
            raise ValueError(
                f"{torso} needs observations of at least {smallest}x{smallest}; got {tuple(shape)}"
            )
    return torso


def cnn_torso(
    kind: str, channels: int, init: Callable[[nn.Module], nn.Module] | None = None
) -> nn.Sequential:
    """The convolutions of torso `kind` (each followed by a ReLU) and a flatten, for
    `channels` input planes; `init` (if any) initialises each convolution as it is made."""
    layers: list[nn.Module] = []
    inputs = channels
    for outputs, kernel, stride, padding in _LAYERS[kind]:
        conv: nn.Module = nn.Conv2d(inputs, outputs, kernel, stride=stride, padding=padding)
        layers += [init(conv) if init is not None else conv, nn.ReLU()]
        inputs = outputs
    layers.append(nn.Flatten())
    return nn.Sequential(*layers)
