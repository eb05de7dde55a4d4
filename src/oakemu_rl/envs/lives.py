"""Lives lost between two readings of a game's `lives` variable, and wins with none lost."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def lives_lost(before: Any, after: Any) -> int:
    """How many lives fell from `before` to `after` (an env info's ``"lives"``).

    0 when either is None (the game reports no lives) or when lives rose (an extra life
    is not a loss).
    """
    if before is None or after is None:
        return 0
    return max(0, int(before) - int(after))


def clean_win_rate(outcomes: Sequence[str | None], lost: Sequence[int]) -> float:
    """The share of episodes won with no life lost (`outcomes` and `lost`: one per episode);
    NaN for none."""
    if not outcomes:
        return float("nan")
    clean = [outcome == "win" and n == 0 for outcome, n in zip(outcomes, lost, strict=True)]
    return sum(clean) / len(clean)


def win_rate_text(win_rate: float, clean_win_rate: float) -> str:
    """'60% (8% with no life lost)'; just '0%' when nothing was won."""
    if not win_rate or math.isnan(win_rate) or math.isnan(clean_win_rate):
        return f"{win_rate:.0%}"
    return f"{win_rate:.0%} ({clean_win_rate:.0%} with no life lost)"
