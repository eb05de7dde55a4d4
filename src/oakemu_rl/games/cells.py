"""Cells of a game's state from its data variables: Go-Explore's cells (Ecoffet et al.
2021), such as the player's position, cut into coarse bins.

Which variables name a cell can be given, or found: `controlled_variables` probes random
play, holding each action from the same saved states, and keeps the variables whose values
the choice of action changes (the player's position, a gauge the player spends), leaving
out what the YAML already scores (its reward variables) and the random generator's seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .loader import GameDefinition
from .schema import RandomizeStep
from .session import GameSession

SAMPLE_STEPS = 400
"""Random steps the probe plays: enough to see a position's spread."""


@dataclass(frozen=True)
class VariableCells:
    """A cell is the tuple of `names`' values, each divided by its bin `widths`."""

    names: tuple[str, ...]
    widths: tuple[int, ...]

    def cell(self, values: Mapping[str, int]) -> int:
        """The cell of one step's variables, as an int: the same in every process and
        Python version, since checkpoints keep the counts by it."""
        cell = 0
        for name, width in zip(self.names, self.widths, strict=True):
            cell = (cell * 1_000_003 + int(values[name]) // width) % (1 << 62)
        return cell

    def describe(self) -> str:
        """'diver_x (bins of 4), diver_y (bins of 2)'."""
        return ", ".join(f"{n} (bins of {w})" for n, w in zip(self.names, self.widths, strict=True))


def _random_play(
    session: GameSession, steps: int, rng: np.random.Generator
) -> tuple[list[dict[str, int]], list[bytes]]:
    """The variables after each of `steps` random steps (new episodes as they end), and
    the machine state every `steps // 8` steps."""
    num_actions = session.game.num_actions
    session.reset(int(rng.integers(0, 2**31 - 1)))
    values, states = [], []
    for t in range(steps):
        if t % max(steps // 8, 1) == 0:
            states.append(session.save_state())
        outcome = session.step(int(rng.integers(0, num_actions))).outcome
        values.append(session.values)
        if outcome is not None:
            session.reset(int(rng.integers(0, 2**31 - 1)))
    return values, states


def controlled_variables(
    game: GameDefinition, steps: int = SAMPLE_STEPS, hold: int = 4, seed: int = 0
) -> list[str]:
    """The data variables that the actions move: from saved states along random play, each
    action is held for `hold` steps, and a variable whose values then differ between the
    actions is one. States from which some action loses a life or ends the episode within
    `hold` steps are not used (the game's flow then changes every variable), and reward
    variables (score, lives) and `randomize`d seeds are left out."""
    session = GameSession(game)
    _, states = _random_play(session, steps, np.random.default_rng(seed))
    return _moved_by_actions(session, states, hold)


def _moved_by_actions(session: GameSession, states: Sequence[bytes], hold: int) -> list[str]:
    spec = session.game.spec
    excluded = set(spec.reward.variables)
    for start_step in spec.start:
        if isinstance(start_step, RandomizeStep):
            excluded.update(start_step.randomize)
    moved: set[str] = set()
    for state in states:
        seen: dict[str, set[int]] = {}
        eventful = False  # a life lost or an episode ended: every variable may follow
        for action in range(session.game.num_actions):
            session.reset_to_state(state)
            for _ in range(hold):
                step = session.step(action)
                eventful |= step.outcome is not None or any(
                    v < 0 for v in step.reward_terms.values()
                )
            for name, value in session.values.items():
                seen.setdefault(name, set()).add(value)
        if not eventful:
            moved.update(name for name, values in seen.items() if len(values) > 1)
    return [name for name in spec.data if name in moved and name not in excluded]


def variable_cells(
    game: GameDefinition,
    names: Sequence[str] | None = None,
    levels: int = 8,
    steps: int = SAMPLE_STEPS,
    seed: int = 0,
) -> VariableCells:
    """Cells from the variables `names` (None: `controlled_variables`), each cut into
    bins as wide as its spread over random play / `levels` (at least 1), so random play
    spans about `levels` bins of each and states beyond its reach get bins of their own."""
    spec = game.spec
    session = GameSession(game)
    values, states = _random_play(session, steps, np.random.default_rng(seed))
    if names is None:
        names = _moved_by_actions(session, states, hold=4)
        if not names:
            raise ValueError(
                f"novelty: no data variable of {spec.name!r} ({game.path}) moves with the "
                "actions; name the cell's variables (reward_shaping novelty `variables`)"
            )
    else:
        unknown = [n for n in names if n not in spec.data]
        if unknown:
            raise ValueError(
                f"novelty: variables {unknown} are not data variables of {spec.name!r} "
                f"({game.path}); it has {sorted(spec.data)}"
            )
    widths = []
    for name in names:
        seen = [v[name] for v in values]
        widths.append(max(1, math.ceil((max(seen) - min(seen) + 1) / levels)))
    return VariableCells(tuple(names), tuple(widths))
