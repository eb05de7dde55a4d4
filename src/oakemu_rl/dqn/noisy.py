"""Factorised-Gaussian NoisyNet linear layers (Fortunato et al., 2018)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def _scaled_noise(size: int, device: torch.device) -> torch.Tensor:
    x = torch.randn(size, device=device)
    return x.sign() * x.abs().sqrt()


class NoisyLinear(nn.Module):
    """y = (mu_w + sigma_w * eps_w) x + (mu_b + sigma_b * eps_b), with factorised noise.

    The noise is drawn by `reset_noise()` and kept until the next call. In eval mode
    the layer is deterministic (the mean weights only).
    """

    weight_epsilon: torch.Tensor
    bias_epsilon: torch.Tensor

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer(
            "weight_epsilon", torch.zeros(out_features, in_features), persistent=False
        )
        self.register_buffer("bias_epsilon", torch.zeros(out_features), persistent=False)
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(self.weight_mu, -bound, bound)
        nn.init.uniform_(self.bias_mu, -bound, bound)
        nn.init.constant_(self.weight_sigma, sigma0 / math.sqrt(in_features))
        nn.init.constant_(self.bias_sigma, sigma0 / math.sqrt(in_features))
        self.reset_noise()

    @torch.no_grad()
    def reset_noise(self) -> None:
        """Draw new factorised noise."""
        eps_in = _scaled_noise(self.in_features, self.weight_mu.device)
        eps_out = _scaled_noise(self.out_features, self.weight_mu.device)
        self.weight_epsilon.copy_(torch.outer(eps_out, eps_in))
        self.bias_epsilon.copy_(eps_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return F.linear(x, self.weight_mu, self.bias_mu)
        weight = self.weight_mu + self.weight_sigma * self.weight_epsilon
        bias = self.bias_mu + self.bias_sigma * self.bias_epsilon
        return F.linear(x, weight, bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"
