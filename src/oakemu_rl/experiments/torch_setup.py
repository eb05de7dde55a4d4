"""Torch device and thread count of a run."""

from __future__ import annotations

import os

import torch
from torch import nn

from ..runtime.config_base import ConfigError


def resolve_device(name: str) -> torch.device:
    """'auto' (CUDA when available), 'cpu', 'cuda' or 'cuda:N'; an error if CUDA is missing."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r}: CUDA is not available on this machine")
    return device


def torch_threads_beside(threads: int, workers: int) -> int:
    """The torch thread count that shares the cores with `workers` emulator processes:
    `threads`, or for 0 the cores this process may use minus the workers (at least 1).
    More would starve the workers: torch's idle threads spin, and the workers run at a
    lower priority."""
    if threads == 0:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover
            cores = os.cpu_count() or 1
        threads = max(1, cores - workers)
    return threads


def configure_torch_threads(threads: int, workers: int) -> int:
    """Set torch's thread count so the emulator workers and torch share the cores
    (`torch_threads_beside`); returns it."""
    threads = torch_threads_beside(threads, workers)
    torch.set_num_threads(threads)
    return threads


def build_optimizer(model: nn.Module, learning_rate: float, eps: float) -> torch.optim.Adam:
    """Adam over `model`'s parameters: torch's fused kernel where the device has one (one
    pass over all parameters instead of a kernel per tensor and step), else the default."""
    try:
        return torch.optim.Adam(model.parameters(), lr=learning_rate, eps=eps, fused=True)
    except (RuntimeError, ValueError):  # no fused Adam for this device in this torch
        return torch.optim.Adam(model.parameters(), lr=learning_rate, eps=eps)
