"""Find a game's routines by watching its program counter while it plays.

Three routines matter to a game definition:

- **main_loop**, the code that runs once a frame while the game is being played. Most games
  wait for the frame interrupt with HALT at the top of their loop, so the HALT the CPU sits
  in at the end of most frames of play is the main loop (`find_main_loop`); it is confirmed
  by counting how often the program counter arrives there (once a frame). A game that never
  halts gets the address it runs exactly once in every frame, first after the interrupt.
- **crash**, the code that runs only when a life is lost, and **game_over**, the code that
  runs only when the last one is: the game is played with random keys (`record_play`) and,
  frame by frame, the code run for the first time is noted (every RAM address is watched
  until it first runs, so play stays fast). Code first seen near a moment when the lives
  variable fell (or, for game over, the last such moment before the game went back to its
  title) is then watched over the same play again, replayed exactly, and scored by how many
  of those moments it ran at and how rarely it ran anywhere else (`find_event_routines`).
  Its entry is the exclusive code that ran first, followed through an unconditional CALL or
  JP into exclusive code.

The emulator reports the program counter through breakpoint marks (`ZXSpectrum.trace_frame`)
on a copy of the machine: nothing is sampled, every arrival at a watched address is seen.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..emulator.machine import ZXSpectrum
from ..games.schema import DataVariable, PressStep, RandomizeStep, StartStep, WaitStep
from ..games.variables import DECODERS, encode_value, value_range

#: Where game code can run: all of RAM.
RAM = range(0x4000, 0x10000)

_HALT = 0x76
_CALL = 0xCD
_JP = 0xC3
_JR = 0x18


@dataclass(frozen=True)
class RoutineCandidate:
    """A guessed routine: its name, entry address, a confidence (0-1) and why."""

    name: str
    address: int
    confidence: float
    evidence: str

    def yaml_entry(self) -> str:
        """The line for a game YAML's `routines:` section, e.g. ``main_loop: 0x81AC``."""
        return f"{self.name}: 0x{self.address:04X}"


# -- watching the program counter -------------------------------------------------------------


def address_spans(addresses: Iterable[int]) -> list[range]:
    """Sorted addresses as runs of consecutive ones."""
    spans: list[range] = []
    start = previous = -2
    for address in sorted(set(addresses)):
        if address != previous + 1:
            if start >= 0:
                spans.append(range(start, previous + 1))
            start = address
        previous = address
    if start >= 0:
        spans.append(range(start, previous + 1))
    return spans


class CoverageTracer:
    """Runs a copy of a machine frame by frame, reporting arrivals at watched addresses.

    Each instruction run at a watched address stops the emulator once, so addresses that
    are no longer of interest are dropped with `unwatch`: the copy is then rebuilt from its
    own state before the next frame, which changes nothing about the emulation.
    """

    def __init__(self, machine: ZXSpectrum, watch: Iterable[int]) -> None:
        self.machine = machine.copy()
        self._watch: set[int] = set(watch)
        self._marked = False

    @property
    def watched(self) -> frozenset[int]:
        return frozenset(self._watch)

    def unwatch(self, addresses: Iterable[int]) -> None:
        """Stop reporting these addresses (from the next frame on)."""
        before = len(self._watch)
        self._watch.difference_update(addresses)
        if len(self._watch) != before and self._marked:
            self.machine = self.machine.copy()
            self._marked = False

    def frame(self, keys: Iterable[str] = ()) -> list[int]:
        """Run one frame holding `keys`; the watched addresses reached, in order."""
        self.machine.set_keys(keys)
        spans = () if self._marked else address_spans(self._watch)
        self._marked = True
        return self.machine.trace_frame(spans)


def halt_address(machine: ZXSpectrum) -> int | None:
    """The address of the HALT the CPU is waiting in, or None when it is not halted."""
    if not machine.halted:
        return None
    pc = machine.register("pc")
    for address in (pc - 1, pc):  # the core leaves PC after the HALT, as a real Z80 does
        if 0 <= address <= 0xFFFF and machine.read_byte(address) == _HALT:
            return address
    return None


# -- the main loop ------------------------------------------------------------------------------


def find_main_loop(
    machine: ZXSpectrum,
    actions: Sequence[Sequence[str]] = ((),),
    frames: int = 200,
    seed: int = 0,
    frame_skip: int = 4,
) -> RoutineCandidate | None:
    """The main loop of a game being played on `machine` (left as it was).

    Plays `frames` frames on a copy with random `actions`, each held `frame_skip` frames.
    """
    rng = np.random.default_rng(seed)
    play = machine.copy()
    halts: Counter[int | None] = Counter()
    keys: Sequence[str] = ()
    for n in range(frames):
        if n % frame_skip == 0:
            keys = actions[int(rng.integers(len(actions)))]
        play.set_keys(keys)
        play.run_frames(1)
        halts[halt_address(play)] += 1
    halted = [(count, address) for address, count in halts.items() if address is not None]
    if halted:
        count, address = max(halted)
        share = count / frames
        once = _once_per_frame(machine, address, actions, rng, frame_skip, min(frames, 100))
        return RoutineCandidate(
            "main_loop",
            address,
            round(min(1.0, 0.2 + 0.8 * share) * (0.5 + 0.5 * once), 2),
            f"the HALT the CPU waits in at the end of {count} of {frames} frames of play; "
            f"reached once in {once:.0%} of the frames that reach it",
        )
    return _busy_main_loop(machine, actions, rng, frame_skip, min(frames, 30))


def _play_keys(
    actions: Sequence[Sequence[str]], rng: np.random.Generator, frame_skip: int, frames: int
) -> list[Sequence[str]]:
    keys: list[Sequence[str]] = []
    for n in range(frames):
        keys.append(actions[int(rng.integers(len(actions)))] if n % frame_skip == 0 else keys[-1])
    return keys


def _once_per_frame(
    machine: ZXSpectrum,
    address: int,
    actions: Sequence[Sequence[str]],
    rng: np.random.Generator,
    frame_skip: int,
    frames: int,
) -> float:
    """The share of the frames that reach `address` which reach it exactly once."""
    tracer = CoverageTracer(machine, [address])
    arrivals = [len(tracer.frame(k)) for k in _play_keys(actions, rng, frame_skip, frames)]
    reached = sum(1 for n in arrivals if n)
    return sum(1 for n in arrivals if n == 1) / max(reached, 1)


def _busy_main_loop(
    machine: ZXSpectrum,
    actions: Sequence[Sequence[str]],
    rng: np.random.Generator,
    frame_skip: int,
    frames: int,
) -> RoutineCandidate | None:
    """A game that never halts: the address run exactly once in (nearly) every frame, the
    earliest after the interrupt handler returns."""
    tracer = CoverageTracer(machine, RAM)
    counts: Counter[int] = Counter()
    first_at: dict[int, list[int]] = {}
    resume = tracer.machine.register("pc")
    for keys in _play_keys(actions, rng, frame_skip, frames):
        arrivals = tracer.frame(keys)
        # The frame starts in the interrupt handler; the main program resumes where the
        # last frame ended.
        start = arrivals.index(resume) if resume in arrivals else 0
        body = arrivals[start:]
        per_frame = Counter(body)
        for n, address in enumerate(dict.fromkeys(body)):
            if per_frame[address] == 1:
                counts[address] += 1
                first_at.setdefault(address, []).append(n)
        resume = tracer.machine.register("pc")
    steady = [a for a, c in counts.items() if c >= 0.9 * frames]
    if not steady:
        return None
    address = min(steady, key=lambda a: (float(np.mean(first_at[a])), a))
    return RoutineCandidate(
        "main_loop",
        address,
        round(0.5 * counts[address] / frames, 2),
        f"the game never halts; run exactly once in {counts[address]} of {frames} frames, "
        "first after the interrupt",
    )


# -- recording random play -------------------------------------------------------------------


@dataclass(frozen=True)
class PlayFrame:
    """One frame of recorded play."""

    keys: frozenset[str]
    in_loop: bool  # the main loop ran in this frame
    lives: int | None  # the lives variable at the frame's end
    new_code: tuple[int, ...]  # addresses run for the first time, in order
    restart: bool  # the start key was pressed to begin another game


@dataclass
class PlayRecording:
    """Random play from `start_state`, frame by frame; replayable exactly from its keys."""

    start_state: bytes
    model: Literal["48k", "128k"]
    main_loop: int
    lives: DataVariable | None = None
    frames: list[PlayFrame] = field(default_factory=list)

    def machine(self) -> ZXSpectrum:
        """A machine at the recording's first frame."""
        machine = ZXSpectrum(self.model)
        machine.load_state(self.start_state)
        return machine

    def life_losses(self) -> list[int]:
        """Frames at whose end the lives variable had fallen."""
        losses = []
        for n in range(1, len(self.frames)):
            now, before = self.frames[n].lives, self.frames[n - 1].lives
            if now is not None and before is not None and now < before:
                losses.append(n)
        return losses

    def restarts(self) -> list[int]:
        """Frames where another game was started after the last one ended."""
        return [n for n, f in enumerate(self.frames) if f.restart]

    def game_overs(self) -> list[int]:
        """For each game that ended: its last life lost, or else its last frame of play.

        A game ends when another one had to be started, or when its lives reach zero.
        """
        losses = self.life_losses()
        moments = []
        begin = 0
        for restart in [*self.restarts(), len(self.frames)]:
            lost = [n for n in losses if begin <= n < restart]
            if restart == len(self.frames):
                lost = [n for n in lost if self.frames[n].lives == 0][-1:]
                if lost:
                    moments.append(lost[-1])
            elif lost:
                moments.append(lost[-1])
            else:
                played = [n for n in range(begin, restart) if self.frames[n].in_loop]
                if played:
                    moments.append(played[-1])
            begin = restart
        return moments


def read_variable(machine: ZXSpectrum, variable: DataVariable) -> int:
    """A data variable's value now."""
    return DECODERS[variable.type](machine.read(variable.address, variable.size))


def apply_randomize(
    machine: ZXSpectrum, step: RandomizeStep, data: dict[str, DataVariable], seed: int
) -> None:
    """What a `randomize` start step does: a seeded value, never 0, into each variable."""
    rng = np.random.default_rng(seed)
    for name in step.randomize:
        var = data[name]
        low, high = value_range(var.type, var.size)
        value = int(rng.integers(max(low, 1), high, endpoint=True))
        machine.write(var.address, encode_value(var.type, value, var.size))


def start_frames(start: Sequence[StartStep]) -> list[frozenset[str]]:
    """The keys held in each frame of a start procedure's `wait` and `press` steps."""
    frames: list[frozenset[str]] = []
    for step in start:
        if isinstance(step, WaitStep):
            frames.extend([frozenset()] * step.wait)
        elif isinstance(step, PressStep):
            frames.extend([frozenset(step.press)] * step.frames)
    return frames


def record_play(
    machine: ZXSpectrum,
    main_loop: int,
    actions: Sequence[Sequence[str]],
    start: Sequence[frozenset[str]] = (),
    restart: Sequence[frozenset[str]] = (frozenset({"SPACE"}), frozenset({"SPACE"})),
    lives: DataVariable | None = None,
    max_frames: int = 8000,
    games: int = 3,
    min_losses: int = 6,
    frame_skip: int = 4,
    restart_after: int = 60,
    seed: int = 0,
) -> PlayRecording:
    """Play with random `actions` (each held `frame_skip` frames) from `machine`'s state.

    `start` gives the keys of the first frames (a start procedure); whenever the main loop
    has not run for `restart_after` frames, the `restart` frames are played to begin another
    game. Stops after `games` games have ended with at least `min_losses` lives lost, or
    after `max_frames` frames. Every frame notes the code run for the first time.
    """
    rng = np.random.default_rng(seed)
    recording = PlayRecording(machine.save_state(), machine.model, main_loop, lives)
    unseen = set(RAM)
    tracer = CoverageTracer(machine, unseen)
    scripted: list[tuple[frozenset[str], bool]] = [(k, False) for k in start]
    idle = 0
    ended = losses = 0
    played = False  # whether the main loop ran since the last (re)start
    held: frozenset[str] = frozenset()
    last_lives = read_variable(machine, lives) if lives is not None else None
    for n in range(max_frames):
        is_restart = False
        if scripted:
            keys, is_restart = scripted.pop(0)
        else:
            if n % frame_skip == 0:
                held = frozenset(actions[int(rng.integers(len(actions)))])
            keys = held
            if idle >= restart_after:
                scripted = [(k, i == 0) for i, k in enumerate(restart)]
                keys, is_restart = scripted.pop(0)
                idle = 0
        arrivals = tracer.frame(keys)
        new = [a for a in dict.fromkeys(arrivals) if a in unseen]
        unseen.difference_update(new)
        tracer.unwatch(a for a in new if a != main_loop)
        in_loop = main_loop in arrivals
        idle = 0 if in_loop else idle + 1
        if is_restart and played:
            ended += 1
            played = False
            if ended >= games and losses >= min_losses:
                recording.frames.append(PlayFrame(keys, in_loop, None, tuple(new), True))
                break
        played = played or in_loop
        value = read_variable(tracer.machine, lives) if lives is not None else None
        if value is not None and last_lives is not None and value < last_lives:
            losses += 1
        last_lives = value
        recording.frames.append(PlayFrame(keys, in_loop, value, tuple(new), is_restart))
    return recording


# -- crash and game over ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Window:
    moment: int
    frames: range


def _windows(moments: Iterable[int], before: int, after: int, length: int) -> list[_Window]:
    return [_Window(m, range(max(0, m - before), min(length, m + after + 1))) for m in moments]


@dataclass
class _Hits:
    """For one watched address: the frames it ran in, and its order of first arrival there."""

    frames: dict[int, int] = field(default_factory=dict)


def _replay_watching(
    recording: PlayRecording,
    candidates: set[int],
    is_background: Callable[[int], bool],
    max_background: int,
) -> dict[int, _Hits] | None:
    """Replay the recording watching `candidates`; an address that runs in more than
    `max_background` background frames is dropped. None when the replay went differently."""
    tracer = CoverageTracer(recording.machine(), candidates)
    hits: dict[int, _Hits] = {a: _Hits() for a in candidates}
    background: Counter[int] = Counter()
    lives = recording.lives
    for n, played in enumerate(recording.frames):
        arrivals = tracer.frame(played.keys)
        if lives is not None and played.lives not in (None, read_variable(tracer.machine, lives)):
            return None  # the replay went differently
        drop = []
        for order, address in enumerate(dict.fromkeys(arrivals)):
            if address not in hits:
                continue
            hits[address].frames[n] = order
            if is_background(n):
                background[address] += 1
                if background[address] > max_background:
                    drop.append(address)
        for address in drop:
            del hits[address]
        tracer.unwatch(drop)
    return hits


@dataclass(frozen=True)
class _Score:
    address: int
    coverage: float  # share of the moments' windows it ran in
    leaks: int  # background frames it ran in
    first: float  # mean (frames after the window's start, order in that frame)


def _score(
    hits: dict[int, _Hits], windows: list[_Window], is_background: Callable[[int], bool]
) -> list[_Score]:
    scores = []
    for address, hit in hits.items():
        starts = []
        for window in windows:
            inside = [n for n in window.frames if n in hit.frames]
            if inside:
                n = inside[0]
                starts.append((n - window.moment) + hit.frames[n] / 10_000)
        if not starts:
            continue
        leaks = sum(1 for n in hit.frames if is_background(n))
        scores.append(_Score(address, len(starts) / len(windows), leaks, float(np.mean(starts))))
    return scores


def _entry(
    machine: ZXSpectrum, scores: list[_Score], good: Callable[[_Score], bool]
) -> _Score | None:
    """The earliest exclusive address, followed through unconditional CALL/JP/JR into code
    that is exclusive too."""
    chosen = [s for s in scores if good(s)]
    if not chosen:
        return None
    by_address = {s.address: s for s in chosen}
    entry = min(chosen, key=lambda s: (s.first, s.address))
    for _ in range(8):
        opcode = machine.read_byte(entry.address)
        target: int | None = None
        if opcode in (_CALL, _JP) and entry.address <= 0xFFFD:
            target = (
                machine.read_byte(entry.address + 1) | machine.read_byte(entry.address + 2) << 8
            )
        elif opcode == _JR and entry.address <= 0xFFFE:
            offset = machine.read_byte(entry.address + 1)
            target = (entry.address + 2 + offset - (256 if offset >= 128 else 0)) & 0xFFFF
        if target is None or target not in by_address:
            break
        entry = by_address[target]
    return entry


@dataclass(frozen=True)
class EventRoutines:
    """What `find_event_routines` found: the candidates and the moments it looked at."""

    crash: RoutineCandidate | None
    game_over: RoutineCandidate | None
    life_losses: list[int]
    game_overs: list[int]
    frames: int


def find_event_routines(
    recording: PlayRecording,
    life_losses: Sequence[int] | None = None,
    game_overs: Sequence[int] | None = None,
    crash_window: tuple[int, int] = (40, 5),
    game_over_window: tuple[int, int] = (5, 200),
) -> EventRoutines:
    """The crash and game-over routines of a recorded game.

    `life_losses` and `game_overs` are frames of the recording (by default, where the lives
    variable fell, and each game's last such moment or last frame of play); the windows
    are (frames before, frames after) each moment.
    """
    length = len(recording.frames)
    losses = list(recording.life_losses() if life_losses is None else life_losses)
    overs = list(recording.game_overs() if game_overs is None else game_overs)
    crash_windows = _windows(losses, *crash_window, length)
    over_windows = _windows(overs, *game_over_window, length)
    in_crash = np.zeros(length, dtype=bool)
    in_over = np.zeros(length, dtype=bool)
    for window in crash_windows:
        in_crash[window.frames.start : window.frames.stop] = True
    for window in over_windows:
        # A game's end lasts until the next game starts.
        stop = next((r for r in recording.restarts() if r > window.moment), window.frames.stop)
        in_over[window.frames.start : max(stop, window.frames.stop)] = True
    candidates: set[int] = set()
    for n, played in enumerate(recording.frames):
        if in_crash[n] or in_over[n]:
            candidates.update(played.new_code)
    candidates.discard(recording.main_loop)
    background_frames = int((~(in_crash | in_over)).sum())
    allowance = max(2, background_frames // 100)
    hits = _replay_watching(
        recording, candidates, lambda n: not (in_crash[n] or in_over[n]), allowance
    )
    machine = recording.machine()
    crash = game_over = None
    if hits and crash_windows:
        scores = _score(hits, crash_windows, lambda n: not (in_crash[n] or in_over[n]))
        crash = _best("crash", machine, scores, len(crash_windows), background_frames, "lives fell")
    if hits and over_windows:
        others = int((~in_over).sum())
        scores = _score(hits, over_windows, lambda n: not in_over[n])
        game_over = _best("game_over", machine, scores, len(over_windows), others, "a game ended")
    return EventRoutines(crash, game_over, losses, overs, length)


def _best(
    name: str,
    machine: ZXSpectrum,
    scores: list[_Score],
    moments: int,
    others: int,
    what: str,
) -> RoutineCandidate | None:
    exclusive = [s for s in scores if s.leaks == 0] or [
        s for s in scores if s.leaks <= max(1, others // 200)
    ]
    if not exclusive:
        return None
    best = max(s.coverage for s in exclusive)
    entry = _entry(machine, exclusive, lambda s: s.coverage >= best - 0.2)
    if entry is None:
        return None
    certainty = 1.0 - 0.5 ** min(moments, 6)  # one moment is weak evidence, four fairly good
    leak_factor = math.exp(-entry.leaks / max(1, others // 200))
    confidence = round(entry.coverage * certainty * leak_factor * 0.95, 2)
    ran = round(entry.coverage * moments)
    return RoutineCandidate(
        name,
        entry.address,
        confidence,
        f"ran near {ran} of {moments} moments when {what}, "
        f"{'never' if entry.leaks == 0 else f'{entry.leaks} times'} in {others} other frames",
    )


# -- all together ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoutineReport:
    """The routines found in one recorded stretch of random play."""

    main_loop: RoutineCandidate
    events: EventRoutines
    recording: PlayRecording

    @property
    def candidates(self) -> list[RoutineCandidate]:
        """main_loop, then crash and game_over where found."""
        found = [self.main_loop]
        found += [r for r in (self.events.crash, self.events.game_over) if r is not None]
        return found


def find_routines(
    machine: ZXSpectrum,
    actions: Sequence[Sequence[str]],
    start: Sequence[frozenset[str]] = (),
    restart: Sequence[frozenset[str]] = (frozenset({"SPACE"}), frozenset({"SPACE"})),
    lives: DataVariable | None = None,
    main_loop: RoutineCandidate | None = None,
    seed: int = 0,
    max_frames: int = 8000,
) -> RoutineReport:
    """The main loop, crash and game-over routines of the game on `machine` (at its snapshot).

    `start` holds the keys of each frame of the start procedure, `restart` those that begin
    another game from the title; `lives` is the lives variable (crash moments come from it);
    `main_loop` is found by playing when not given.
    """
    loop = main_loop
    if loop is None:
        play = machine.copy()
        for keys in start:
            play.set_keys(keys)
            play.run_frames(1)
        play.set_keys(())
        found = find_main_loop(play, actions, seed=seed)
        if found is None:
            raise ValueError(
                "no main loop: after the start procedure the game neither halts at one place "
                "nor runs any address once a frame; is the game running?"
            )
        loop = found
    recording = record_play(
        machine,
        loop.address,
        actions,
        start=start,
        restart=restart,
        lives=lives,
        max_frames=max_frames,
        seed=seed,
    )
    return RoutineReport(loop, find_event_routines(recording), recording)
