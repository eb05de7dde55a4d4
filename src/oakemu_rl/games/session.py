"""A running game: the emulator plus the rules of one game definition."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..emulator.machine import ZXSpectrum
from .errors import StartProcedureError
from .loader import GameDefinition
from .schema import Condition, GameSpec, PressStep, RandomizeStep, RunUntilStep, WaitStep
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


TIME_TERM = "time"
"""The name of the per-step `reward.time` term (`time:step` if a reward variable is `time`)."""

EVENT_PREFIX = "event:"
"""Prefixed to an event's term when a reward variable (or `time`) has the same name."""


@dataclass(frozen=True)
class GameStep:
    """What one agent step did to the game.

    `reward_terms` splits `reward` by source (see `reward_term_names`); only non-zero
    terms are present, and adding them up in order gives `reward` exactly.
    """

    reward: float
    events: tuple[str, ...]
    outcome: Outcome | None
    values: dict[str, int]
    reward_terms: dict[str, float] = field(default_factory=dict)


def reward_term_names(spec: GameSpec) -> dict[str, str]:
    """The name of each reward term of a game, keyed by where it comes from in the YAML.

    Keys are ``variables.<name>``, ``time`` and ``events.<name>``; values are the term
    names: a variable's name, ``time``, an event's name. An event named like a reward
    variable or ``time`` becomes ``event:<name>``; the time term of a game with a reward
    variable named ``time`` becomes ``time:step``.
    """
    reward = spec.reward
    names = {f"variables.{name}": name for name in reward.variables}
    names["time"] = "time:step" if TIME_TERM in reward.variables else TIME_TERM
    taken = set(names.values())
    for name in reward.events:
        names[f"events.{name}"] = EVENT_PREFIX + name if name in taken else name
    return names


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
        # The reward rules with their term names, resolved once (no strings per step).
        reward = spec.reward
        names = reward_term_names(spec)
        self._time_term = (names["time"], reward.time)
        self._variable_terms = [
            (name, names[f"variables.{name}"], rule.reward, rule.penalty)
            for name, rule in reward.variables.items()
        ]
        self._event_terms = {
            name: (names[f"events.{name}"], value) for name, value in reward.events.items() if value
        }

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
                self.randomize(step.randomize, rng)
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

    def randomize(self, names: Iterable[str], rng: np.random.Generator) -> None:
        """Write a value drawn from `rng` into each of the data variables `names` (what a
        `randomize` step of the start procedure does), never 0."""
        data = self.game.spec.data
        for name in names:
            var = data[name]
            low, high = value_range(var.type, var.size)
            # Never 0: a zero seed stalls the usual xorshift/LFSR generators.
            self.write_value(name, int(rng.integers(max(low, 1), high, endpoint=True)))

    def write_value(self, name: str, value: int) -> None:
        """Write `value` into the data variable `name`, encoded as the YAML declares it.
        `values` still holds what the last step or reset read."""
        var = self.game.spec.data[name]
        self.machine.write(var.address, encode_value(var.type, value, var.size))

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

        # Terms in a fixed order (time, variables, events); the reward is their sum in
        # that order, so adding up `reward_terms` gives it bit for bit.
        terms: dict[str, float] = {}
        time_name, time_reward = self._time_term
        if time_reward:
            terms[time_name] = time_reward
        for name, term, gain, penalty in self._variable_terms:
            delta = values[name] - previous[name]
            if delta:
                value = delta * (gain if delta > 0 else penalty)
                if value:
                    terms[term] = value
        event_terms = self._event_terms
        for name in events:
            found = event_terms.get(name)
            if found is not None:
                terms[found[0]] = found[1]
        reward = 0.0
        for value in terms.values():
            reward += value

        outcome: Outcome | None = None
        if self._any(spec.episode.win, values, previous, events):
            outcome = "win"
        elif self._any(spec.episode.loss, values, previous, events):
            outcome = "loss"
        elif self.steps >= spec.max_episode_steps:
            outcome = "truncated"
        return GameStep(reward, events, outcome, values, terms)

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
