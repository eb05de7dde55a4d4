"""Find the keys a game reads while it is being played, and the action set they make.

Two steps. The port reads the game's own code makes (`ZXSpectrum.set_port_read_hook`;
reads by ROM code, such as the 48K ROM's keyboard scan in an IM 1 interrupt, are left out)
say which keyboard half-rows it scans (port 0xFE with a zero in address line A8+n selects
half-row n) and whether it reads a Kempston joystick (port 0x1F). Then each key of those
rows is held for some frames from a few saved moments of play and the screen compared with
holding nothing: a key that changes what is shown is an action key. A key held that stops the
main loop (a pause or quit key) is left out. Two action keys make a combined action when
holding both shows something different from each alone and from nothing (O+SPACE:
moving while firing), but not when it shows what one of them or nothing does (O+P).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from ..emulator.keyboard import HALF_ROWS, KEMPSTON_BITS
from ..emulator.machine import ZXSpectrum

#: Keys taken for "fire" when ordering actions: listed after the movement keys.
FIRE_KEYS = ("SPACE", "0", "M", "ENTER", "SYMBOL_SHIFT", "CAPS_SHIFT", "KEMPSTON_FIRE")
_KEMPSTON_PORT = 0x1F
_ROM_END = 0x4000


@dataclass(frozen=True)
class PortReads:
    """The keyboard and joystick reads a game's code made."""

    half_rows: dict[int, int]  # half-row (0-7) -> reads selecting it alone
    multi_row: int  # reads selecting several half-rows at once ("any key?")
    kempston: int  # reads of the Kempston port
    readers: dict[int, int]  # address after the reading instruction -> reads
    frames: int
    rom: bool = False  # the game's code read nothing: these are the ROM's reads

    def candidate_keys(self) -> list[str]:
        """The keys these reads can see: the rows read alone (all 40 keys when the game only
        reads several rows at once), and the Kempston directions when it reads port 0x1F."""
        rows = sorted(self.half_rows) or (list(range(8)) if self.multi_row else [])
        keys = [key for row in rows for key in HALF_ROWS[row]]
        if self.kempston:
            keys += list(KEMPSTON_BITS)
        return keys


def record_port_reads(
    machine: ZXSpectrum,
    frames: int = 100,
    keys: Sequence[Sequence[str]] = ((),),
    frame_skip: int = 4,
    seed: int = 0,
) -> PortReads:
    """Run `frames` frames on a copy of `machine`, holding `keys` picked at random, and note
    the port reads of code in RAM (those of the ROM when code in RAM reads nothing: a game
    that reads the keyboard through the ROM)."""
    play = machine.copy()
    rows = {False: Counter[int](), True: Counter[int]()}
    readers = {False: Counter[int](), True: Counter[int]()}
    multi: Counter[bool] = Counter()
    kempston: Counter[bool] = Counter()

    def note(port: int, value: int) -> None:
        pc = play.register("pc")
        rom = pc < _ROM_END
        if not port & 1:
            selected = [row for row in range(8) if not port >> 8 & 1 << row]
            if len(selected) == 1:
                rows[rom][selected[0]] += 1
            elif selected:
                multi[rom] += 1
            else:
                return
        elif port & 0xFF == _KEMPSTON_PORT:
            kempston[rom] += 1
        else:
            return
        readers[rom][pc] += 1

    rng = np.random.default_rng(seed)
    play.set_port_read_hook(note)
    for n in range(frames):
        if n % frame_skip == 0:
            play.set_keys(keys[int(rng.integers(len(keys)))])
        play.run_frames(1)
    play.set_port_read_hook(None)
    rom = not readers[False]
    return PortReads(dict(rows[rom]), multi[rom], kempston[rom], dict(readers[rom]), frames, rom)


@dataclass(frozen=True)
class KeyEffect:
    """What holding one key did, over the test states."""

    key: str
    shown: float  # share of states where the screen ended up different
    memory: float  # share of states where RAM outside the screen ended up different
    stops_main_loop: bool  # the main loop no longer ran while it was held

    @property
    def acts(self) -> bool:
        return self.shown > 0 and not self.stops_main_loop


def _run_holding(
    state: bytes, model: str, keys: Sequence[str], frames: int, main_loop: int | None
) -> tuple[bytes, bytes, bool]:
    """(screen, RAM after the screen, whether the main loop ran in the last frames)."""
    machine = ZXSpectrum("48k" if model == "48k" else "128k")
    machine.load_state(state)
    machine.set_keys(keys)
    ran = True
    if main_loop is None:
        machine.run_frames(frames)
    else:
        machine.set_breakpoints({"main_loop": main_loop})
        events = []
        for _ in range(frames):
            events.append(bool(machine.run_frames(1)))
        ran = any(events[-max(1, frames // 3) :])
    return bytes(machine.display_memory()), machine.read(0x5B00, 0x10000 - 0x5B00), ran


def key_effects(
    states: Sequence[bytes],
    model: str,
    keys: Sequence[str],
    frames: int = 12,
    main_loop: int | None = None,
) -> list[KeyEffect]:
    """Hold each key for `frames` frames from each state and compare with holding nothing."""
    baselines = [_run_holding(s, model, (), frames, main_loop) for s in states]
    effects = []
    for key in keys:
        shown = memory = 0
        stops = False
        for state, (screen, ram, ran) in zip(states, baselines, strict=True):
            key_screen, key_ram, key_ran = _run_holding(state, model, (key,), frames, main_loop)
            shown += key_screen != screen
            memory += key_ram != ram
            stops = stops or (ran and not key_ran)
        n = max(len(states), 1)
        effects.append(KeyEffect(key, shown / n, memory / n, stops))
    return effects


def combined_pairs(
    states: Sequence[bytes],
    model: str,
    keys: Sequence[str],
    frames: int = 12,
) -> list[tuple[str, str]]:
    """The pairs of keys whose holding together shows something neither shows alone."""
    screens: dict[tuple[str, ...], list[bytes]] = {}

    def shown(held: tuple[str, ...]) -> list[bytes]:
        if held not in screens:
            screens[held] = [_run_holding(s, model, held, frames, None)[0] for s in states]
        return screens[held]

    pairs = []
    for a, b in combinations(keys, 2):
        both, alone_a, alone_b, none = shown((a, b)), shown((a,)), shown((b,)), shown(())
        if any(s not in (x, y, z) for s, x, y, z in zip(both, alone_a, alone_b, none, strict=True)):
            pairs.append((a, b))
    return pairs


@dataclass(frozen=True)
class GameKeys:
    """The keys a game reads and what they do; `actions` is the action set they make."""

    reads: PortReads
    effects: list[KeyEffect]
    keys: list[str]  # the action keys, movement first, then fire
    pairs: list[tuple[str, str]]  # keys that combine
    control: list[str] = field(default_factory=list)  # keys that stop the main loop
    alternatives: list[str] = field(default_factory=list)  # e.g. Kempston, when keys act too

    @property
    def actions(self) -> list[list[str]]:
        """No key, each action key, then each combining pair."""
        return [[], *([k] for k in self.keys), *([a, b] for a, b in self.pairs)]

    def confidence(self, key: str) -> float:
        """How sure we are that `key` acts: the share of test states where it did."""
        return next((e.shown for e in self.effects if e.key == key), 0.0)


def _order(keys: Sequence[str]) -> list[str]:
    return sorted(
        keys, key=lambda k: (k in FIRE_KEYS, FIRE_KEYS.index(k) if k in FIRE_KEYS else 0, k)
    )


def find_keys(
    machine: ZXSpectrum,
    main_loop: int | None = None,
    frames: int = 120,
    states: int = 4,
    hold: int = 12,
    seed: int = 0,
    max_pairs: int = 8,
) -> GameKeys:
    """The action keys of a game being played on `machine` (left as it was).

    Runs `frames` frames noting the port reads and saving `states` moments, then tries
    every key the reads can see from each moment, holding it `hold` frames. Pairs are tried
    when at most `max_pairs` keys act (more make a large action set already).
    """
    reads = record_port_reads(machine, frames, seed=seed)
    play = machine.copy()
    saved: list[bytes] = []
    every = max(1, frames // states)
    for n in range(frames):
        play.run_frames(1)
        if n % every == every // 2 and len(saved) < states:
            saved.append(play.save_state())
    effects = key_effects(saved, machine.model, reads.candidate_keys(), hold, main_loop)
    acting = [e.key for e in effects if e.acts]
    control = [e.key for e in effects if e.stops_main_loop]
    keyboard = [k for k in acting if k not in KEMPSTON_BITS]
    joystick = [k for k in acting if k in KEMPSTON_BITS]
    keys, alternatives = (keyboard, joystick) if keyboard else (joystick, [])
    keys = _order(keys)
    pairs = combined_pairs(saved, machine.model, keys, hold) if 1 < len(keys) <= max_pairs else []
    pairs = [tuple(_order(p)) for p in pairs]  # type: ignore[misc]
    pairs.sort(key=lambda p: (keys.index(p[1]), keys.index(p[0])))
    return GameKeys(reads, effects, keys, pairs, control, alternatives)
