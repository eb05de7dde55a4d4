"""ActionMasker: restricts actions to the game's training action set."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import torch


class ActionMasker:
    """The actions an agent may take: all `num_actions` of the game, or the `allowed` subset.

    Random actions are drawn from the allowed set; greedy actions take the best
    allowed Q-value.
    """

    def __init__(self, num_actions: int, allowed: Sequence[int] | None = None) -> None:
        if num_actions < 1:
            raise ValueError(f"num_actions must be at least 1, got {num_actions}")
        self.num_actions = num_actions
        if allowed is None:
            allowed = range(num_actions)
        indices = sorted(set(int(a) for a in allowed))
        bad = [a for a in indices if not 0 <= a < num_actions]
        if bad or not indices:
            raise ValueError(
                f"allowed actions {list(allowed)} must be a non-empty subset of "
                f"0..{num_actions - 1}"
            )
        self.allowed: npt.NDArray[np.int64] = np.array(indices, dtype=np.int64)
        self.restricts = len(indices) < num_actions
        mask = torch.full((num_actions,), float("-inf"))
        mask[torch.from_numpy(self.allowed)] = 0.0
        self._mask = mask

    def sample(self, rng: np.random.Generator) -> int:
        """A uniformly random allowed action."""
        return int(self.allowed[rng.integers(len(self.allowed))])

    def additive_mask(self, device: torch.device) -> torch.Tensor | None:
        """0 for allowed actions and -inf for the others, to add to Q values (None when
        every action is allowed)."""
        return self._mask.to(device) if self.restricts else None

    def mask(self, q_values: torch.Tensor) -> torch.Tensor:
        """Q-values with the disallowed actions at -inf."""
        if not self.restricts:
            return q_values
        return q_values + self._mask.to(q_values.device)

    def greedy(self, q_values: torch.Tensor) -> npt.NDArray[np.int64]:
        """The best allowed action of each row."""
        return self.mask(q_values).argmax(dim=1).cpu().numpy()
