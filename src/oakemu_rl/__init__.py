"""OakEmu-RL: deep reinforcement learning on ZX Spectrum games."""

__version__ = "0.1.0"
