"""A running game: the emulator plus the rules of one game definition."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..emulator.machine import ZXSpectrum
from .errors import StartProcedureError
from .loader import GameDefinition
from .schema import Condition, PressStep, RandomizeStep, RunUntilStep, WaitStep
from .variables import DECODERS, encode_value, value_range

Outcome = Literal["win", "loss", "truncated"]

_OPS: dict[str, Callable[[int, int], bool]] = {
    "zero": lambda v, _: v == 0,
    "nonzero": lambda v, _: v != 0,
    "positive": lambda v, _: v > 0,
    "negative": lambda v, _: v < 0,
    "equal": operator.eq,
    "not-equal": operator.ne,
    "less-than": operator.lt,
    "greater-than": operator.gt,
    "less-or-equal": operator.le,
    "greater-or-equal": operator.ge,
}


@dataclass(frozen=True)
class GameStep:
    """What one agent step did to the game."""

    reward: float
    events: tuple[str, ...]
    outcome: Outcome | None
    values: dict[str, int]


class GameSession:
    """Runs one game: resets through its start procedure, steps actions, scores them."""

    def __init__(self, game: GameDefinition) -> None:
        self.game = game
        spec = game.spec
        self.machine = ZXSpectrum(spec.machine)
        self.machine.load_snapshot(game.snapshot)
        self.machine.set_breakpoints(spec.routines)
        self._snapshot_state = self.machine.save_state()
        self._readers = [
            (name, var.address, var.size, DECODERS[var.type]) for name, var in spec.data.items()
        ]
        self._actions = [frozenset(keys) for keys in spec.actions]
        self._values: dict[str, int] = {}
        self.steps = 0

    # -- variables --------------------------------------------------------------

    def read_values(self) -> dict[str, int]:
        """Decode every data variable from memory now."""
        read = self.machine.read
        return {name: decode(read(address, size)) for name, address, size, decode in self._readers}

    @property
    def values(self) -> dict[str, int]:
        """The variables as of the end of the last step or reset."""
        return dict(self._values)

    # -- reset ------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> None:
        """Load the snapshot and run the start procedure; `randomize` draws from `seed`."""
        rng = np.random.default_rng(seed)
        machine = self.machine
        machine.load_state(self._snapshot_state)
        machine.set_keys(())
        spec = self.game.spec
        for n, step in enumerate(spec.start):
            if isinstance(step, RandomizeStep):
                for name in step.randomize:
                    var = spec.data[name]
                    low, high = value_range(var.type, var.size)
                    # Never 0: a zero seed stalls the usual xorshift/LFSR generators.
                    value = int(rng.integers(max(low, 1), high, endpoint=True))
                    machine.write(var.address, encode_value(var.type, value, var.size))
            elif isinstance(step, WaitStep):
                machine.run_frames(step.wait)
            elif isinstance(step, PressStep):
                machine.set_keys(step.press)
                machine.run_frames(step.frames)
                machine.set_keys(())
            elif isinstance(step, RunUntilStep):
                address = spec.routines[step.run_until]
                if machine.run_until(address, step.timeout_frames) is None:
                    raise StartProcedureError(
                        f"game {spec.name!r} ({self.game.path}): start[{n}] run_until "
                        f"{step.run_until!r} (0x{address:04X}) was not reached within "
                        f"{step.timeout_frames} frames"
                    )
        self._begin()

    def reset_to_state(self, state: bytes) -> None:
        """Start an episode from a saved machine state (a restart point)."""
        self.machine.load_state(state)
        self.machine.set_keys(())
        self._begin()

    def _begin(self) -> None:
        self.steps = 0
        self._values = self.read_values()

    # -- stepping -----------------------------------------------------------------

    def step(self, action: int) -> GameStep:
        """Hold the action's keys for `frame_skip` frames and score the result."""
        spec = self.game.spec
        self.machine.set_keys(self._actions[action])
        hits = self.machine.run_frames(spec.frame_skip)
        events = tuple(dict.fromkeys(hits))
        previous, values = self._values, self.read_values()
        self._values = values
        self.steps += 1

        reward = spec.reward.time
        for name, rule in spec.reward.variables.items():
            delta = values[name] - previous[name]
            if delta > 0:
                reward += delta * rule.reward
            elif delta < 0:
                reward += delta * rule.penalty
        for name in events:
            reward += spec.reward.events.get(name, 0.0)

        outcome: Outcome | None = None
        if self._any(spec.episode.win, values, previous, events):
            outcome = "win"
        elif self._any(spec.episode.loss, values, previous, events):
            outcome = "loss"
        elif self.steps >= spec.max_episode_steps:
            outcome = "truncated"
        return GameStep(reward, events, outcome, values)

    @staticmethod
    def _any(
        conditions: list[Condition],
        values: dict[str, int],
        previous: dict[str, int],
        events: tuple[str, ...],
    ) -> bool:
        for cond in conditions:
            if cond.event is not None:
                if cond.event in events:
                    return True
                continue
            assert cond.variable is not None and cond.op is not None
            value = values[cond.variable]
            if cond.measurement == "delta":
                value -= previous[cond.variable]
            if _OPS[cond.op](value, cond.reference):
                return True
        return False

    def save_state(self) -> bytes:
        return self.machine.save_state()
