"""A scripted RAM search: record a game's RAM while it plays, then keep the addresses whose
value, read in some encoding, obeys what a person would say about it ("equals 3 at the
start", "fell by one when I lost a life", "rose when the score rose", "is the number on
the screen labelled SCORE").

Every encoding a game YAML's `data:` section supports is tried at every recorded address:
byte, signed_byte, word, word_be, bcd of 1-3 bytes and number_string of 1-6 ASCII digits.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import numpy as np
import numpy.typing as npt

from ..emulator.snapshots import READERS, load_snapshot
from ..emulator.tape import is_tape_path
from ..games.loader import GameDefinition, load_game
from ..games.schema import (
    Condition,
    DataVariable,
    EpisodeSpec,
    GameSpec,
    RandomizeStep,
    RewardSpec,
)
from ..games.session import GameSession
from ..games.variables import DECODERS, FIXED_SIZES, VariableType
from .screen_text import UNKNOWN, ScreenNumber, ScreenReader, find_fonts

__all__ = [
    "ENCODINGS",
    "LIVES_LABELS",
    "SCORE_LABELS",
    "Candidate",
    "ChangedBy",
    "Constraint",
    "Equals",
    "EqualsScreen",
    "FallsByOne",
    "OnlyRises",
    "RamRecording",
    "RisesWith",
    "ScoreAndLives",
    "find_score_and_lives",
    "find_variables",
    "game_from_snapshot",
    "load_search_game",
    "record_ram",
]

#: Every (type, length) the search reads at each address.
ENCODINGS: tuple[tuple[VariableType, int], ...] = (
    ("byte", 1), ("signed_byte", 1), ("word", 2), ("word_be", 2),
    ("bcd", 1), ("bcd", 2), ("bcd", 3),
    *(("number_string", n) for n in range(1, 7)),
)  # fmt: skip
#: On-screen labels taken for the score and for the lives (compared without case or ':').
SCORE_LABELS: tuple[str, ...] = ("SCORE", "SCORES", "POINTS", "PTS", "1UP", "SC")
LIVES_LABELS: tuple[str, ...] = ("LIVES", "LIFE", "MEN", "SHIPS", "LEFT", "LIVES LEFT")

_RAM_START = 0x5B00  # the first byte after the screen
_SCREEN_START = 0x4000
_CHUNK = 1024  # addresses decoded at once
_FONT_REFRESH_STEPS = 50  # how often record_ram looks for new fonts while cells are unreadable

Prior = Callable[[str, int], float]


class StepPolicy(Protocol):
    """Chooses the action of recording step `step` (counted over the whole recording)."""

    def __call__(self, step: int, session: GameSession) -> int: ...


class TrajectoryLike(Protocol):
    """A recorded episode to replay (a `trajectories.Trajectory`): its actions and seed."""

    @property
    def actions(self) -> npt.NDArray[np.int16]: ...

    @property
    def start_seed(self) -> int | None: ...


PolicyArg = (
    Literal["random"] | StepPolicy | Sequence[int] | npt.NDArray[np.integer[Any]] | TrajectoryLike
)


# -- recording ----------------------------------------------------------------------------


@dataclass(eq=False)
class RamRecording:
    """RAM at every observation of a played game: row 0 after the start procedure, then one
    row after each action. Rows where `episode_starts` is set follow a reset."""

    ram: npt.NDArray[np.uint8]  # (rows, size): RAM from `base`
    base: int
    episode_starts: npt.NDArray[np.bool_]
    actions: npt.NDArray[np.int16]  # the action that led to each row; -1 after a reset
    events: list[tuple[str, ...]]  # the routines reached in the step that led to each row
    screen: list[tuple[ScreenNumber, ...]] | None = None  # the numbers on screen at each row
    game: str = ""

    def __post_init__(self) -> None:
        self.ram = np.asarray(self.ram, dtype=np.uint8)
        if self.ram.ndim != 2 or not len(self.ram):
            raise ValueError(f"a RAM recording needs (rows, bytes) RAM; got {self.ram.shape}")
        rows = len(self.ram)
        if self.base < 0 or self.base + self.ram.shape[1] > 0x10000:
            raise ValueError(
                f"RAM of {self.ram.shape[1]} bytes from 0x{self.base:04X} passes 0xFFFF"
            )
        self.episode_starts = np.array(self.episode_starts, dtype=bool)
        self.actions = np.asarray(self.actions, dtype=np.int16)
        sizes = {len(self.episode_starts), len(self.actions), len(self.events)}
        if self.screen is not None:
            sizes.add(len(self.screen))
        if sizes != {rows}:
            raise ValueError(
                f"a RAM recording of {rows} rows needs {rows} episode starts, actions, events "
                "(and screens)"
            )
        self.episode_starts[0] = True

    @property
    def rows(self) -> int:
        return len(self.ram)

    @property
    def end(self) -> int:
        """One past the last recorded address."""
        return self.base + int(self.ram.shape[1])

    @property
    def episodes(self) -> int:
        return int(self.episode_starts.sum())

    @cached_property
    def changing(self) -> npt.NDArray[np.bool_]:
        """Which recorded bytes change at some row."""
        return np.asarray((self.ram != self.ram[0]).any(axis=0))

    @property
    def transitions(self) -> npt.NDArray[np.bool_]:
        """Rows that follow the row before in the same episode (an action led to them)."""
        return ~self.episode_starts

    def decode(self, address: int, type: str, length: int | None = None) -> npt.NDArray[np.int64]:
        """A variable's value at every row, decoded as the game YAML's `type` would be."""
        variable = DataVariable(address=address, type=cast(VariableType, type), length=length)
        if address < self.base or address + variable.size > self.end:
            raise ValueError(
                f"{type} at 0x{address:04X} is outside the recorded RAM "
                f"0x{self.base:04X}-0x{self.end - 1:04X}"
            )
        offset = address - self.base
        decode = DECODERS[variable.type]
        block = self.ram[:, offset : offset + variable.size]
        return np.array([decode(bytes(row)) for row in block], dtype=np.int64)

    def steps_with_events(self, names: Collection[str]) -> list[int]:
        """Rows whose step reached one of these routines."""
        wanted = set(names)
        return [n for n, events in enumerate(self.events) if wanted.intersection(events)]

    def screen_labels(self) -> dict[str, int]:
        """Each on-screen label (upper case) and the number of rows that show it."""
        counts: dict[str, int] = {}
        for numbers in self._screens():
            for label in {_label_key(n.label) for n in numbers if n.label}:
                counts[label] = counts.get(label, 0) + 1
        return counts

    def screen_series(
        self, label: str
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], list[str]]:
        """The number labelled `label` at each row (the first such on the screen).

        Returns its values (carried forward within an episode where it is not shown,
        back from the first row that shows it), whether each row shows it, and its text
        ('' where not shown).
        """
        key = _label_key(label)
        values = np.zeros(self.rows, dtype=np.int64)
        present = np.zeros(self.rows, dtype=bool)
        texts = [""] * self.rows
        for row, numbers in enumerate(self._screens()):
            for number in numbers:
                if number.label is not None and _label_key(number.label) == key:
                    values[row], present[row], texts[row] = number.value, True, number.text
                    break
        if present.any():
            last, first = -1, int(values[int(np.argmax(present))])
            for row in range(self.rows):
                if present[row]:
                    last = int(values[row])
                else:
                    carry = self.episode_starts[row] or last < 0
                    values[row] = first if carry else last
                    last = int(values[row])
        return values, present, texts

    def _screens(self) -> list[tuple[ScreenNumber, ...]]:
        if self.screen is None:
            raise ValueError(
                f"the recording of {self.game or 'this game'} holds no screen numbers; "
                "record it with screen=True"
            )
        return self.screen


def _label_key(label: str) -> str:
    return label.strip().rstrip(":=").upper()


def game_from_snapshot(
    snapshot: str | Path,
    *,
    start_keys: Sequence[str] = (),
    actions: Sequence[Sequence[str]] | None = None,
    wait_frames: int = 50,
    frame_skip: int = 4,
) -> GameDefinition:
    """A bare game for a snapshot or tape: wait, press `start_keys` for two frames, then play
    `actions` (default: nothing, O, P, Q, A, SPACE)."""
    path = Path(snapshot).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such snapshot or tape")
    if path.suffix.lower() not in READERS and not is_tape_path(path):
        raise ValueError(f"{path}: expected a .z80, .sna or .szx snapshot, or a .tap or .tzx tape")
    model = "48k" if is_tape_path(path) else load_snapshot(path).model
    start: list[dict[str, Any]] = [{"wait": wait_frames}]
    if start_keys:
        start += [{"press": list(start_keys), "frames": 2}, {"wait": 2}]
    default = [[], ["O"], ["P"], ["Q"], ["A"], ["SPACE"]]
    spec = GameSpec.model_validate(
        {
            "name": path.stem,
            "machine": model,
            "snapshot": str(path),
            "frame_skip": frame_skip,
            "start": start,
            "actions": [list(a) for a in actions] if actions else default,
        }
    )
    return GameDefinition(spec, path.with_suffix(".yaml"))


def load_search_game(game: GameDefinition | str | Path) -> GameDefinition:
    """A GameDefinition as it is; a snapshot or tape as `game_from_snapshot`; else a bundled
    game's key or a YAML path, loaded."""
    if isinstance(game, GameDefinition):
        return game
    suffix = Path(game).suffix.lower()
    if suffix in READERS or is_tape_path(game):
        return game_from_snapshot(game)
    return load_game(game)


def _search_game(game: GameDefinition) -> GameDefinition:
    """The game without what its `data:` section says: only the variables `start.randomize`
    draws are kept (the start needs them); rewards go, and so do episode conditions on
    variables (those on routine events stay)."""
    spec = game.spec
    drawn = {n for step in spec.start if isinstance(step, RandomizeStep) for n in step.randomize}

    def events_only(conditions: list[Condition]) -> list[Condition]:
        return [c for c in conditions if c.event is not None]

    stripped = spec.model_copy(
        update={
            "data": {name: var for name, var in spec.data.items() if name in drawn},
            "reward": RewardSpec(),
            "episode": EpisodeSpec(
                win=events_only(spec.episode.win), loss=events_only(spec.episode.loss)
            ),
        }
    )
    return GameDefinition(stripped, game.path)


@dataclass(frozen=True)
class _Policy:
    act: StepPolicy
    steps: int | None = None  # how many actions it has (None: any number)
    seed: int | None = None  # where a trajectory starts: the seed of its start procedure
    state: bytes | None = None  # or a machine state


def _policy(policy: PolicyArg, num_actions: int, rng: np.random.Generator) -> _Policy:
    """The policy as a function of (step, session), and where a trajectory starts."""
    if isinstance(policy, str):
        if policy != "random":
            raise ValueError(f"policy {policy!r}: expected 'random', a function or actions")
        return _Policy(lambda step, session: int(rng.integers(num_actions)))
    if callable(policy):
        return _Policy(policy)
    seed = getattr(policy, "start_seed", None)
    state = getattr(policy, "start_state", None)
    actions = np.asarray(getattr(policy, "actions", policy), dtype=np.int64).ravel()
    bad = actions[(actions < 0) | (actions >= num_actions)]
    if len(bad):
        raise ValueError(
            f"trajectory action {int(bad[0])} is outside the game's 0..{num_actions - 1}"
        )
    return _Policy(lambda step, session: int(actions[step]), len(actions), seed, state)


def record_ram(
    game: GameDefinition | str | Path,
    *,
    steps: int = 500,
    policy: PolicyArg = "random",
    seed: int = 0,
    episode_steps: int | None = None,
    screen: bool = False,
    screen_memory: bool = False,
) -> RamRecording:
    """Play `steps` actions of `game` and record its RAM after the start and after each one.

    `game` is a GameDefinition, a bundled game's key or YAML path (its snapshot and start
    procedure are used, never its `data:` section beyond what `start.randomize` needs), or
    a snapshot or tape (see `game_from_snapshot`). `policy` is "random" (uniform actions
    drawn from `seed`), a function `(step, session) -> action`, or a trajectory (a sequence
    of actions, or an object with `actions` and `start_seed` or `start_state`, where it
    starts), whose end also ends the recording. An episode ends after `episode_steps`
    (default: the game's `max_episode_steps`) or on one of its episode conditions on
    routine events; the next starts from a reset drawn from `seed`. `screen` adds the
    numbers on screen at each row (`read_numbers`);
    `screen_memory` records from 0x4000 instead of 0x5B00.
    """
    if steps < 1:
        raise ValueError(f"steps {steps}: expected at least 1")
    if episode_steps is not None and episode_steps < 1:
        raise ValueError(f"episode_steps {episode_steps}: expected at least 1")
    definition = _search_game(load_search_game(game))
    rng = np.random.default_rng(seed)
    chosen = _policy(policy, definition.num_actions, rng)
    if chosen.steps is not None:
        steps = min(steps, chosen.steps)
    per_episode = episode_steps or definition.spec.max_episode_steps
    session = GameSession(definition)
    machine = session.machine
    base = _SCREEN_START if screen_memory else _RAM_START
    size = 0x10000 - base

    rows: list[npt.NDArray[np.uint8]] = []
    starts: list[bool] = []
    actions: list[int] = []
    events: list[tuple[str, ...]] = []
    numbers: list[tuple[ScreenNumber, ...]] = []
    reader: ScreenReader | None = None
    fonts_checked = 0

    def observe(action: int, hit: tuple[str, ...], start: bool) -> None:
        nonlocal reader, fonts_checked
        rows.append(np.frombuffer(machine.read(base, size), dtype=np.uint8))
        starts.append(start)
        actions.append(action)
        events.append(hit)
        if screen:
            since = len(rows) - fonts_checked
            if reader is None or start or since >= _FONT_REFRESH_STEPS:
                lines = None if reader is None else reader.read_text(machine)
                if lines is None or any(UNKNOWN in line.text for line in lines):
                    reader = ScreenReader(find_fonts(machine))
                fonts_checked = len(rows)
            assert reader is not None
            numbers.append(tuple(reader.read_numbers(machine)))

    done = 0
    while done < steps:
        if done == 0 and chosen.state is not None:
            session.reset_to_state(chosen.state)
        elif done == 0 and chosen.seed is not None:
            session.reset(seed=chosen.seed)
        else:
            session.reset(seed=int(rng.integers(2**31)))
        observe(-1, (), True)
        for _ in range(per_episode):
            if done >= steps:
                break
            action = chosen.act(done, session)
            result = session.step(action)
            done += 1
            observe(action, result.events, False)
            if result.outcome is not None:
                break
    return RamRecording(
        np.stack(rows),
        base,
        np.array(starts),
        np.array(actions, dtype=np.int16),
        events,
        numbers if screen else None,
        definition.name,
    )


# -- decoding every encoding at every address ------------------------------------------------


@dataclass(frozen=True, eq=False)
class Block:
    """Values of one encoding at some addresses: `values[row, i]` is the variable at
    `addresses[i]`, `raw[j][row, i]` its byte j. A `constant` block holds addresses whose
    bytes never change in the recording, with one row that stands for every row."""

    type: VariableType
    length: int
    addresses: npt.NDArray[np.int64]
    values: npt.NDArray[np.int64]
    raw: tuple[npt.NDArray[np.int64], ...]
    constant: bool = False

    def select(self, keep: npt.NDArray[np.bool_]) -> Block:
        return Block(
            self.type,
            self.length,
            self.addresses[keep],
            self.values[:, keep],
            tuple(r[:, keep] for r in self.raw),
            self.constant,
        )


def _decode(
    kind: VariableType, length: int, raw: Sequence[npt.NDArray[np.int64]]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Values (rows, n) of `kind` from its bytes `raw[j]` (rows, n), and which columns are a
    valid, distinct reading of that kind at every row."""
    first = raw[0]
    columns = first.shape[1]
    if kind == "byte":
        return first, np.ones(columns, dtype=bool)
    if kind == "signed_byte":
        negative = first >= 128
        signed = first - (negative.astype(np.int64) << 8)
        return signed, np.asarray(negative.any(axis=0))  # else the same as a byte
    if kind == "word":
        return first | (raw[1] << 8), np.ones(columns, dtype=bool)
    if kind == "word_be":
        return (first << 8) | raw[1], np.ones(columns, dtype=bool)
    if kind == "bcd":
        values = np.zeros_like(first)
        valid = np.ones(columns, dtype=bool)
        for byte in raw:
            high, low = byte >> 4, byte & 0x0F
            valid &= ((high <= 9) & (low <= 9)).all(axis=0)
            values = values * 100 + high * 10 + low
        if length == 1:
            valid &= (values >= 10).any(axis=0)  # else the same as a byte
        return values, valid
    # number_string: ASCII digits, blanks only before them (leading spaces read as 0)
    values = np.zeros_like(first)
    valid = np.ones(columns, dtype=bool)
    before_space = np.ones(first.shape, dtype=bool)
    for j, byte in enumerate(raw):
        digit = (byte >= 0x30) & (byte <= 0x39)
        space = byte == 0x20
        last = j == len(raw) - 1
        valid &= (digit if last else digit | (space & before_space)).all(axis=0)
        before_space = space & before_space
        values = values * 10 + np.where(digit, byte - 0x30, 0)
    return values, valid


def _blocks(recording: RamRecording, types: Collection[str] | None) -> Iterator[Block]:
    """Every valid encoding at every recorded address: the addresses whose bytes never change
    as constant blocks (decoded from the first row), the others a chunk at a time."""
    changing = recording.changing
    first = recording.ram[:1].astype(np.int64)
    for kind, length in ENCODINGS:
        if types is not None and kind not in types:
            continue
        varies = np.lib.stride_tricks.sliding_window_view(changing, length).any(axis=1)
        columns = np.flatnonzero(~varies)
        if len(columns):
            raw = tuple(first[:, columns + j] for j in range(length))
            values, valid = _decode(kind, length, raw)
            addresses = recording.base + columns.astype(np.int64)
            yield Block(kind, length, addresses, values, raw, constant=True).select(valid)
        varying = np.flatnonzero(varies)
        for start in range(0, len(varying), _CHUNK):
            columns = varying[start : start + _CHUNK]
            raw = tuple(recording.ram[:, columns + j].astype(np.int64) for j in range(length))
            values, valid = _decode(kind, length, raw)
            addresses = recording.base + columns.astype(np.int64)
            yield Block(kind, length, addresses, values, raw).select(valid)


# -- constraints --------------------------------------------------------------------------


Evaluator = Callable[[Block], npt.NDArray[np.float64]]


class Constraint(ABC):
    """Something a variable does in a recording. `bind` checks it against the recording and
    returns a function from a Block to a score per address: 0 rejects, up to 1 fits best."""

    @abstractmethod
    def bind(self, recording: RamRecording) -> Evaluator: ...

    @abstractmethod
    def describe(self) -> str: ...


def _check_row(recording: RamRecording, step: int, what: str) -> int:
    if not -recording.rows <= step < recording.rows:
        raise ValueError(
            f"{what}: step {step} is outside the recording's steps 0..{recording.rows - 1}"
        )
    return step % recording.rows


def _changes(values: npt.NDArray[np.int64], rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """values[row] - values[row - 1] at each of `rows`: (len(rows), n)."""
    return values[rows] - values[rows - 1]


def _none(block: Block) -> npt.NDArray[np.float64]:
    return np.zeros(len(block.addresses))


@dataclass(frozen=True)
class Equals(Constraint):
    """The variable equals `value` at step `step` (0: right after the start; -1: the last)."""

    value: int
    step: int = 0

    def bind(self, recording: RamRecording) -> Evaluator:
        row = _check_row(recording, self.step, f"equals {self.value}")

        def evaluate(block: Block) -> npt.NDArray[np.float64]:
            values = block.values[0 if block.constant else row]
            return np.asarray(values == self.value, dtype=np.float64)

        return evaluate

    def describe(self) -> str:
        return f"equals {self.value} at step {self.step}"


@dataclass(frozen=True)
class ChangedBy(Constraint):
    """The variable changed by `delta` into each of `steps` from the step before (steps
    where an event happened: "fell by one when I lost a life" is ChangedBy(-1, those steps)).

    With `only_then` it changed at no other step of an episode; without, changes at other
    steps only lower the score.
    """

    delta: int
    steps: Sequence[int]
    only_then: bool = False

    def bind(self, recording: RamRecording) -> Evaluator:
        what = f"changed by {self.delta}"
        if not len(self.steps):
            raise ValueError(f"{what}: give at least one step where it changed")
        rows = np.array(sorted({_check_row(recording, s, what) for s in self.steps}), np.intp)
        starts = [int(r) for r in rows if recording.episode_starts[r]]
        if starts:
            raise ValueError(
                f"{what}: step {starts[0]} starts an episode (it follows a reset, not an "
                "action); expected steps reached by an action"
            )
        others = np.flatnonzero(recording.transitions)
        others = others[~np.isin(others, rows)]

        def evaluate(block: Block) -> npt.NDArray[np.float64]:
            if block.constant:
                return np.full(len(block.addresses), float(self.delta == 0))
            fits = (_changes(block.values, rows) == self.delta).all(axis=0)
            elsewhere = (_changes(block.values, others) != 0).sum(axis=0)
            if self.only_then:
                fits &= elsewhere == 0
            return np.where(fits, len(rows) / (len(rows) + elsewhere), 0.0)

        return evaluate

    def describe(self) -> str:
        steps = list(self.steps)
        shown = ", ".join(map(str, steps[:8])) + (", ..." if len(steps) > 8 else "")
        return f"changed by {self.delta:+d} at step(s) {shown}" + (
            " and at no other" if self.only_then else ""
        )


@dataclass(frozen=True)
class RisesWith(Constraint):
    """The variable rose at (at least `min_fraction` of) the steps where `reference` rose.

    `reference` holds one value per recorded row. With `only_then` it changed at no other
    step; without, changes at other steps only lower the score.
    """

    reference: Sequence[int] | npt.NDArray[np.integer[Any]]
    name: str = "the reference"
    only_then: bool = False
    min_fraction: float = 1.0

    def bind(self, recording: RamRecording) -> Evaluator:
        reference = np.asarray(self.reference, dtype=np.int64)
        if reference.shape != (recording.rows,):
            raise ValueError(
                f"rises with {self.name}: expected one reference value per recorded step "
                f"({recording.rows}); got shape {reference.shape}"
            )
        if not 0 < self.min_fraction <= 1:
            raise ValueError(f"rises with {self.name}: min_fraction {self.min_fraction}: "
                             "expected more than 0 and at most 1")  # fmt: skip
        steps = np.flatnonzero(recording.transitions)
        rose = reference[steps] > reference[steps - 1]
        rises, others = steps[rose], steps[~rose]
        if not len(rises):
            raise ValueError(
                f"rises with {self.name}: {self.name} never rose in the "
                f"{recording.rows} recorded steps; record more steps or another policy"
            )

        def evaluate(block: Block) -> npt.NDArray[np.float64]:
            if block.constant:
                return _none(block)
            followed = (_changes(block.values, rises) > 0).sum(axis=0)
            elsewhere = (_changes(block.values, others) != 0).sum(axis=0)
            fraction = followed / len(rises)
            fits = fraction >= self.min_fraction - 1e-9
            if self.only_then:
                fits &= elsewhere == 0
            return np.where(fits, fraction * followed / np.maximum(followed + elsewhere, 1), 0.0)

        return evaluate

    def describe(self) -> str:
        return f"rose when {self.name} rose" + (" and only then" if self.only_then else "")


@dataclass(frozen=True)
class EqualsScreen(Constraint):
    """The variable equals the number on screen labelled `label` (case and a trailing ':'
    ignored) at (at least `min_fraction` of) the recorded steps that show it.

    A number_string whose digits are the text shown (leading zeros included), or a bcd with
    as many digits, scores 1; other encodings of the same values score less.
    """

    label: str
    min_fraction: float = 0.9

    def bind(self, recording: RamRecording) -> Evaluator:
        if not 0 < self.min_fraction <= 1:
            raise ValueError(f"screen label {self.label}: min_fraction {self.min_fraction}: "
                             "expected more than 0 and at most 1")  # fmt: skip
        values, present, texts = recording.screen_series(self.label)
        if not present.any():
            seen = ", ".join(sorted(recording.screen_labels())) or "none"
            raise ValueError(
                f"no number labelled {self.label!r} on the screen in the {recording.rows} "
                f"recorded steps; labels seen: {seen}"
            )
        rows = np.flatnonzero(present)
        shown = values[rows]
        kinds, counts = np.unique(shown, return_counts=True)
        widths = {len(texts[r]) for r in rows}
        width = max(widths)
        text = np.array([[ord(ch) for ch in texts[r].rjust(width)] for r in rows], np.int64)

        def evaluate(block: Block) -> npt.NDArray[np.float64]:
            if block.constant:  # the share of steps that show its one value
                first = block.values[0]
                at = np.minimum(np.searchsorted(kinds, first), len(kinds) - 1)
                fraction = np.where(kinds[at] == first, counts[at] / len(rows), 0.0)
            else:
                fraction = (block.values[rows] == shown[:, None]).mean(axis=0)
            fits = fraction >= self.min_fraction - 1e-9
            shape = np.full(fraction.shape, 0.5)
            if block.type == "number_string":
                shape[:] = 0.3
                if widths == {block.length}:  # its digits are the text shown
                    exact = np.ones(fraction.shape, dtype=bool)
                    for j in range(block.length):
                        byte = block.raw[j][0 if block.constant else rows]
                        exact &= (byte == text[:, j : j + 1]).all(axis=0)
                    shape[exact] = 1.0
            elif block.type == "bcd":
                shape[:] = 1.0 if widths == {2 * block.length} else 0.7
            return np.where(fits, fraction**2 * shape, 0.0)

        return evaluate

    def describe(self) -> str:
        return f"equals the number on screen labelled {self.label}"


def _restarts(
    recording: RamRecording, values: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Each column's change into every transition row, and which of those changes return it
    to its value at the start of the episode (a restart of the game)."""
    steps = np.flatnonzero(recording.transitions)
    first_rows = np.flatnonzero(recording.episode_starts)
    episode = np.cumsum(recording.episode_starts) - 1
    at_start = values[first_rows][episode[steps]]
    change = _changes(values, steps)
    return change, (change != 0) & (values[steps] == at_start)


@dataclass(frozen=True)
class OnlyRises(Constraint):
    """A score: within an episode it never falls (except back to its starting value, when the
    game restarts) and it rises at least `min_rises` times. Starting every episode at
    `starts_at` (None: any value) and rising more often than restarting score higher."""

    min_rises: int = 1
    starts_at: int | None = 0

    def bind(self, recording: RamRecording) -> Evaluator:
        first_rows = np.flatnonzero(recording.episode_starts)

        def evaluate(block: Block) -> npt.NDArray[np.float64]:
            if block.constant:
                fits = np.full(len(block.addresses), self.min_rises <= 0)
                score = np.ones(len(block.addresses))
                starts = block.values[0] == self.starts_at
            else:
                change, restart = _restarts(recording, block.values)
                falls = ((change < 0) & ~restart).sum(axis=0)
                rises = ((change > 0) & ~restart).sum(axis=0)
                fits = (falls == 0) & (rises >= self.min_rises)
                score = rises / np.maximum(rises + restart.sum(axis=0), 1)
                starts = (block.values[first_rows] == self.starts_at).all(axis=0)
            if self.starts_at is not None:
                score = score * np.where(starts, 1.0, 0.25)
            return np.where(fits, score, 0.0)

        return evaluate

    def describe(self) -> str:
        start = "" if self.starts_at is None else f", starting at {self.starts_at}"
        return f"only rose within an episode{start}"


@dataclass(frozen=True)
class FallsByOne(Constraint):
    """Lives: a small number (1..`max_start` at every episode start, never negative) that
    only ever falls by one (or returns to its starting value when the game restarts) and
    falls at least once. With `at` (steps where a life was lost) it falls at exactly those
    steps. Changing rarely, and falling more often than restarting, score higher."""

    at: Sequence[int] | None = None
    max_start: int = 9

    def bind(self, recording: RamRecording) -> Evaluator:
        first_rows = np.flatnonzero(recording.episode_starts)
        steps = np.flatnonzero(recording.transitions)
        expected: npt.NDArray[np.bool_] | None = None
        if self.at is not None:
            rows = sorted({_check_row(recording, s, "falls by one") for s in self.at})
            expected = np.isin(steps, rows)[:, None]

        def evaluate(block: Block) -> npt.NDArray[np.float64]:
            if block.constant:
                return _none(block)  # it never falls
            change, restart = _restarts(recording, block.values)
            falls = (change == -1) & ~restart
            other = (change != 0) & ~falls & ~restart
            start_values = block.values[first_rows]
            fits = (
                ~other.any(axis=0)
                & falls.any(axis=0)
                & ((start_values >= 1) & (start_values <= self.max_start)).all(axis=0)
                & (block.values.min(axis=0) >= 0)
            )
            if expected is not None:
                fits &= (falls == expected).all(axis=0)
            rarely = 1.0 - (change != 0).sum(axis=0) / max(len(steps), 1)
            fell = falls.sum(axis=0)
            return np.where(fits, rarely * fell / np.maximum(fell + restart.sum(axis=0), 1), 0.0)

        return evaluate

    def describe(self) -> str:
        where = "" if self.at is None else " at the given steps"
        return f"a small number that only fell by one{where}"


# -- ranking ------------------------------------------------------------------------------


def default_prior(kind: str, length: int) -> float:
    """How readily a variable is taken to be of this encoding, other things equal: decimal
    display encodings first (a longer number_string a little ahead), sign-less before
    signed."""
    base = {"number_string": 1.0, "bcd": 0.8, "word": 0.7, "byte": 0.7, "word_be": 0.6}
    return base.get(kind, 0.5) + (0.01 * length if kind in ("number_string", "bcd") else 0.0)


def score_prior(kind: str, length: int) -> float:
    """Prior for a score: decimal encodings, and the longest run of digits."""
    if kind == "number_string":
        return 0.9 + 0.02 * length
    if kind == "bcd":
        return 0.7 + 0.02 * length
    return {"word": 0.5, "word_be": 0.4, "byte": 0.45}.get(kind, 0.2)


def lives_prior(kind: str, length: int) -> float:
    """Prior for the lives: one digit or one byte."""
    if kind == "number_string":
        return 1.0 - 0.1 * (length - 1)
    return {"byte": 0.9, "bcd": 0.6}.get(kind, 0.3)


@dataclass(frozen=True)
class Candidate:
    """A variable the search found, with its confidence `score` (0..1, best 1)."""

    address: int
    type: VariableType
    length: int
    score: float
    description: str
    values: npt.NDArray[np.int64] = field(repr=False, compare=False)

    @property
    def confidence(self) -> float:
        return self.score

    @property
    def variable(self) -> DataVariable:
        """The game schema's entry for this variable."""
        fixed = self.type in FIXED_SIZES
        return DataVariable(
            address=self.address, type=self.type, length=None if fixed else self.length
        )

    def yaml_entry(self, name: str) -> str:
        """A `data:` line ready to paste, e.g. `score: {address: 0x8002, type: word}`."""
        length = "" if self.type in FIXED_SIZES else f", length: {self.length}"
        return f"{name}: {{address: 0x{self.address:04X}, type: {self.type}{length}}}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "type": self.type,
            "length": self.length,
            "score": round(self.score, 4),
            "description": self.description,
        }


def _series_hashes(block: Block, weights: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each column's series over every row: equal series, equal hashes
    (a random linear form modulo 2**64, so a constant block needs no rows)."""
    if block.constant:
        total = weights.sum(dtype=np.uint64)
        return np.asarray(block.values[0].view(np.uint64) * total, dtype=np.uint64)
    mixed = block.values.view(np.uint64) * weights[:, None]
    return np.asarray(mixed.sum(axis=0, dtype=np.uint64), dtype=np.uint64)


def _summary(values: npt.NDArray[np.int64]) -> str:
    changes = int((np.diff(values) != 0).sum())
    low, high = int(values.min()), int(values.max())
    return (
        f"{int(values[0])} at the start, {int(values[-1])} at the end, {low}..{high}, "
        f"{changes} change{'s' * (changes != 1)}"
    )


def _fields(
    group: npt.NDArray[np.intp], addresses: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """How many separate runs of memory hold each group's series (overlapping readings of
    the same bytes, such as number_strings of 3 and 4 digits ending together, are one)."""
    order = np.lexsort((addresses, group))
    group, start, end = group[order], group[order] * 0x20000 + addresses[order], ends[order]
    reach = np.maximum.accumulate(group * 0x20000 + end)
    new = np.ones(len(group), dtype=bool)
    new[1:] = start[1:] >= reach[:-1]
    return np.bincount(group[new], minlength=int(group.max()) + 1 if len(group) else 0)


def find_variables(
    recording: RamRecording,
    constraints: Sequence[Constraint],
    *,
    limit: int = 20,
    prior: Prior = default_prior,
    types: Collection[str] | None = None,
) -> list[Candidate]:
    """The addresses and encodings that satisfy every constraint, best first.

    A survivor's weight is the product of its constraint scores and `prior(type, length)`;
    they are ranked by weight. Survivors with identical value series explain the recording
    equally well: its confidence (`score`) is its weight over the sum, across distinct
    series, of the best weight times the number of separate places in memory that hold the
    series about as well (within 10%).
    """
    if not constraints:
        raise ValueError("give at least one constraint; every address fits none")
    if limit < 1:
        raise ValueError(f"limit {limit}: expected at least 1")
    unknown = set(types or ()) - {k for k, _ in ENCODINGS}
    if unknown:
        raise ValueError(
            f"unknown type(s) {', '.join(sorted(unknown))}; expected "
            f"{', '.join(dict.fromkeys(k for k, _ in ENCODINGS))}"
        )
    evaluators = [c.bind(recording) for c in constraints]
    hash_weights = np.random.default_rng(0x5EED).integers(
        1, 2**63, size=recording.rows, dtype=np.uint64
    )
    encoding_index = {encoding: n for n, encoding in enumerate(ENCODINGS)}
    kept: list[tuple[Block, npt.NDArray[np.float64]]] = []
    for block in _blocks(recording, types):
        weight = np.full(len(block.addresses), prior(block.type, block.length))
        for evaluate in evaluators:
            if not len(weight):
                break
            weight = weight * evaluate(block)
            keep = weight > 0
            if not keep.all():
                block, weight = block.select(keep), weight[keep]
        if len(weight):
            kept.append((block, weight))
    if not kept:
        return []
    addresses = np.concatenate([b.addresses for b, _ in kept])
    lengths = np.concatenate([np.full(len(w), b.length) for b, w in kept])
    encodings = np.concatenate(
        [np.full(len(w), encoding_index[(b.type, b.length)]) for b, w in kept]
    )
    weight = np.concatenate([w for _, w in kept])
    hashes = np.concatenate([_series_hashes(b, hash_weights) for b, _ in kept])
    _, group = np.unique(hashes, return_inverse=True)
    group = group.ravel()
    best = np.zeros(int(group.max()) + 1)
    np.maximum.at(best, group, weight)
    near = weight >= 0.9 * best[group]
    fields = _fields(group[near], addresses[near], addresses[near] + lengths[near])
    confidence = weight / float((best * np.maximum(fields, 1)).sum())
    order = np.lexsort((encodings, addresses, -weight))[:limit]
    described = "; ".join(c.describe() for c in constraints)
    candidates = []
    for n in order.tolist():
        kind, length = ENCODINGS[int(encodings[n])]
        address = int(addresses[n])
        values = recording.decode(address, kind, length)
        name = kind if kind in FIXED_SIZES else f"{kind}({length})"
        description = f"{name} at 0x{address:04X}: {_summary(values)}; {described}"
        candidates.append(
            Candidate(address, kind, length, float(min(confidence[n], 1.0)), description, values)
        )
    return candidates


# -- score and lives -----------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreAndLives:
    """Ranked candidates for a game's score and lives, and how each was found."""

    score: list[Candidate]
    lives: list[Candidate]
    score_route: str
    lives_route: str
    recording: RamRecording = field(repr=False)

    @property
    def best_score(self) -> Candidate | None:
        return self.score[0] if self.score else None

    @property
    def best_lives(self) -> Candidate | None:
        return self.lives[0] if self.lives else None


def _shown_label(recording: RamRecording, labels: Sequence[str]) -> str | None:
    """The first of `labels` the screen shows at a tenth or more of the recorded steps."""
    if recording.screen is None:
        return None
    seen = recording.screen_labels()
    for label in labels:
        if seen.get(label, 0) >= max(1, math.ceil(0.1 * recording.rows)):
            return label
    return None


def find_score_and_lives(
    game: GameDefinition | str | Path | None = None,
    *,
    steps: int = 600,
    seed: int = 0,
    policy: PolicyArg = "random",
    episode_steps: int | None = 200,
    screen: bool = True,
    life_events: Collection[str] = (),
    recording: RamRecording | None = None,
    limit: int = 5,
) -> ScoreAndLives:
    """Find a game's score and lives variables by playing it (or in `recording`).

    Where the screen shows a number labelled SCORE (or POINTS, 1UP ...) or LIVES (or LIFE,
    MEN ...) the variable is the one that equals it. Otherwise the score is a value that
    only rises within an episode, and the lives a small value that falls by one (at the
    steps that reached a routine in `life_events`, when given). `screen=False` ignores the
    screen.
    """
    if recording is None:
        if game is None:
            raise ValueError("give a game or a recording")
        recording = record_ram(
            game, steps=steps, seed=seed, policy=policy, episode_steps=episode_steps, screen=screen
        )
    use_screen = screen and recording.screen is not None

    def search(
        label: str | None, fallback: Constraint, fallback_route: str, prior: Prior
    ) -> tuple[list[Candidate], str]:
        if label is not None:
            found = find_variables(recording, [EqualsScreen(label)], limit=limit, prior=prior)
            if found:
                return found, f"the number on screen labelled {label}"
        return find_variables(recording, [fallback], limit=limit, prior=prior), fallback_route

    score, score_route = search(
        _shown_label(recording, SCORE_LABELS) if use_screen else None,
        OnlyRises(),
        "a value that only rises within an episode",
        score_prior,
    )
    at = recording.steps_with_events(life_events) if life_events else None
    lives, lives_route = search(
        _shown_label(recording, LIVES_LABELS) if use_screen else None,
        FallsByOne(at=at),
        "a small value that falls by one" + (f" at {', '.join(life_events)}" if at else ""),
        lives_prior,
    )
    return ScoreAndLives(score, lives, score_route, lives_route, recording)
