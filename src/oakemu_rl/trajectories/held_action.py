"""One action held for a few steps from a saved machine state, counting lives lost: the
move that both lookaheads (the search demonstrator and the search teacher) expand."""

from __future__ import annotations

from dataclasses import dataclass

from ..games.session import GameSession

__all__ = ["HeldAction", "hold_action"]


@dataclass(frozen=True)
class HeldAction:
    """What holding an action did."""

    state: bytes
    """The machine state after it."""
    rewards: list[float]
    """Each step's reward (fewer steps than asked when the episode ended)."""
    lives: int | None
    """The `lives` variable after it (None for a game without one)."""
    lives_lost: int
    """Lives lost on the way."""
    outcome: str | None
    """'win' or 'loss' when the episode ended, 'truncated' at `steps_left`, else None."""
    values: dict[str, int]
    """The game's variables after it."""


def hold_action(
    session: GameSession,
    state: bytes,
    action: int,
    steps: int,
    lives: int | None,
    *,
    steps_left: int | None = None,
) -> HeldAction:
    """Restore `state` and hold `action` for up to `steps` steps; `lives` is the `lives`
    variable at `state` (None: the game has none), `steps_left` the steps the episode may
    still take (None: no limit)."""
    session.reset_to_state(state)
    has_lives = lives is not None
    lost = 0
    rewards: list[float] = []
    outcome: str | None = None
    for _ in range(steps):
        step = session.step(action)
        rewards.append(step.reward)
        now = session.values.get("lives") if has_lives else None
        if lives is not None and now is not None and now < lives:
            lost += lives - now
        lives = now
        if step.outcome in ("win", "loss"):
            outcome = step.outcome
        elif steps_left is not None and len(rewards) >= steps_left:
            outcome = "truncated"
        if outcome is not None:
            break
    return HeldAction(session.save_state(), rewards, lives, lost, outcome, session.values)
