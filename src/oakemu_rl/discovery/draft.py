"""Draft a game YAML from a snapshot or tape alone (`oakemu-rl new-game`).

Each part is found by playing the game and watching it:

1. **start**: run the snapshot with no key until the title settles, then hold each of the
   usual start keys (SPACE, ENTER, 0, 1, S, P, ...) for two frames; the first one after
   which the CPU waits in a new HALT most frames is the start key, and that HALT the main
   loop (`find_start`).
2. **actions**: the keys the game reads during play and that change the screen
   (`keys.find_keys`): no key, each key, and the pairs that combine.
3. **score and lives**: the numbers the screen labels SCORE and LIVES, or values that only
   rise / fall by one, matched against RAM (`memory_search.find_score_and_lives`).
4. **crash and game over**: the code run only when the lives fell, and only when the last
   one went (`routines.find_event_routines`).
5. **rewards and episodes**: the score's typical rise earns 1, a life lost costs about what
   random play scores per life (at least 1); an episode is lost when the lives reach zero or
   the game-over routine runs.

Every guess carries a confidence (0-1) in the YAML's comments, and the file's header lists
what a person still has to check.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .. import __version__
from ..emulator.machine import ZXSpectrum
from ..emulator.snapshots import READERS, Snapshot, load_snapshot
from ..emulator.tape import CACHE_DIR_NAME, is_tape_path, tape_snapshot
from ..games.loader import GameDefinition, parse_game, read_game_yaml
from ..games.schema import DataVariable, GameSpec
from .keys import GameKeys, find_keys
from .routines import EventRoutines, RoutineCandidate, find_main_loop, find_routines, halt_address

#: The keys tried, in order, to start a game from its title screen.
START_KEYS: tuple[str, ...] = (
    "SPACE", "ENTER", "0", "1", "S", "P", "KEMPSTON_FIRE", "5", "N", "Y", "J", "K", "M", "2",
)  # fmt: skip
_SETTLED = 10  # frames a title must stay the same to count as settled
_Where = tuple[str, int]  # ("halt", address of the HALT) or ("pc", program counter)


class DraftError(ValueError):
    """The game could not be drafted (for instance, no key starts it)."""


@dataclass(frozen=True)
class StartProcedure:
    """How a game goes from its snapshot to the main loop."""

    wait: int  # frames with no key before the press
    keys: tuple[str, ...]
    press_frames: int
    main_loop: RoutineCandidate
    frames_to_loop: int  # frames after the press until the main loop is reached
    title_halt: int | None  # the HALT the title waits in, if any
    confidence: float
    tried: tuple[str, ...]  # the keys pressed before one worked

    @property
    def timeout_frames(self) -> int:
        return max(100, 2 * self.frames_to_loop + 50)

    def steps(self) -> list[dict[str, object]]:
        """The YAML `start:` steps."""
        return [
            {"wait": self.wait},
            {"press": list(self.keys), "frames": self.press_frames},
            {"run_until": "main_loop", "timeout_frames": self.timeout_frames},
        ]

    def frames(self) -> list[frozenset[str]]:
        """The keys held in each frame of the wait and the press."""
        return [frozenset()] * self.wait + [frozenset(self.keys)] * self.press_frames

    def run(self, machine: ZXSpectrum) -> None:
        """Run the procedure on `machine` (from the snapshot) up to the main loop."""
        machine.run_frames(self.wait)
        machine.set_keys(self.keys)
        machine.run_frames(self.press_frames)
        machine.set_keys(())
        machine.run_until(self.main_loop.address, self.timeout_frames)


def _signatures(machine: ZXSpectrum, frames: int) -> tuple[list[_Where], list[bytes]]:
    """Per frame: where the CPU is at its end (the HALT it waits in, or else the program
    counter), and the screen."""
    where: list[_Where] = []
    screens: list[bytes] = []
    for _ in range(frames):
        machine.run_frames(1)
        halt = halt_address(machine)
        where.append(("halt", halt) if halt is not None else ("pc", machine.register("pc")))
        screens.append(bytes(machine.display_memory()))
    return where, screens


def _settle_frame(where: list[_Where], screens: list[bytes]) -> int | None:
    """The first frame from which the title stays put: the same HALT or the same screen."""
    for n in range(len(where) - _SETTLED):
        window = range(n, n + _SETTLED)
        if where[n][0] == "halt" and all(where[i] == where[n] for i in window):
            return n
        if all(screens[i] == screens[n] for i in window):
            return n
    return None


def find_start(
    machine: ZXSpectrum,
    keys: Sequence[str] = START_KEYS,
    settle_frames: int = 300,
    watch_frames: int = 100,
) -> StartProcedure:
    """Find how to start the game loaded on `machine` (left as it was).

    A key starts the game when, after it was held, the CPU spends most frames somewhere the
    title never is (another HALT, or other code when the game does not halt) and the screen
    differs from the title's.
    """
    idle = machine.copy()
    where, screens = _signatures(idle, settle_frames)
    settled = _settle_frame(where, screens)
    wait = 50 if settled is None else settled + 1
    title = machine.copy()
    title.run_frames(wait)
    ready = title.save_state()
    base_where, base_screens = _signatures(title.copy(), watch_frames + 2)
    base_late = base_where[-watch_frames // 2 :]
    halts = Counter(address for kind, address in base_late if kind == "halt")
    title_halt = halts.most_common(1)[0][0] if halts else None
    seen = set(base_late)
    tried: list[str] = []
    for press_frames in (2, 10):
        for key in keys:
            trial = ZXSpectrum(machine.model)
            trial.load_state(ready)
            trial.set_keys((key,))
            trial.run_frames(press_frames)
            trial.set_keys(())
            trial_where, trial_screens = _signatures(trial, watch_frames)
            late = trial_where[-watch_frames // 2 :]
            share = sum(1 for w in late if w not in seen) / len(late)
            if share < 0.5 or trial_screens[-1] == base_screens[-1]:
                tried.append(key)
                continue
            return _started(machine, ready, wait, (key,), press_frames, title_halt, tried, share)
    raise DraftError(
        f"none of the keys {', '.join(keys)} (held 2 or 10 frames after {wait} frames) took "
        "the game away from its title; start it by hand (oakemu-rl snapshot --press) and "
        "draft from that snapshot"
    )


def _started(
    machine: ZXSpectrum,
    ready: bytes,
    wait: int,
    keys: tuple[str, ...],
    press_frames: int,
    title_halt: int | None,
    tried: list[str],
    share: float,
) -> StartProcedure:
    playing = ZXSpectrum(machine.model)
    playing.load_state(ready)
    playing.set_keys(keys)
    playing.run_frames(press_frames)
    playing.set_keys(())
    probe = playing.copy()
    probe.run_frames(30)
    main_loop = find_main_loop(probe)
    if main_loop is None:
        raise DraftError(f"{'+'.join(keys)} starts the game, but no main loop was found")
    frames = playing.run_until(main_loop.address, 1000)
    if frames is None:
        raise DraftError(
            f"{'+'.join(keys)} starts the game, but its main loop 0x{main_loop.address:04X} "
            "is not reached from the title"
        )
    confidence = round(min(1.0, share) * (0.95 if not tried else 0.85), 2)
    return StartProcedure(
        wait, keys, press_frames, main_loop, frames, title_halt, confidence, tuple(tried)
    )


# -- the draft ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class VariableGuess:
    """A data variable the search found."""

    variable: DataVariable
    confidence: float
    how: str


@dataclass
class Draft:
    """Everything `draft_game` found, ready to write as a game YAML."""

    name: str
    snapshot: str  # as the YAML names it
    machine: str
    start: StartProcedure
    keys: GameKeys
    score: VariableGuess | None
    lives: VariableGuess | None
    events: EventRoutines | None
    play_area: tuple[int, int, int, int]  # x, y, width, height
    hud_rows: list[int]
    score_reward: float
    lives_penalty: float
    random_state: VariableGuess | None = None
    checks: list[str] = field(default_factory=list)

    @property
    def routines(self) -> list[RoutineCandidate]:
        found = [self.start.main_loop]
        if self.events is not None:
            found += [r for r in (self.events.crash, self.events.game_over) if r is not None]
        return found

    def to_yaml(self) -> str:
        """The game YAML, every guess commented with its confidence."""
        return _render(self)


def load_machine(path: Path, cache_dir: Path | None = None) -> tuple[ZXSpectrum, Snapshot]:
    """A machine with the snapshot (or the loaded tape) at `path` installed; a tape's
    loaded state is cached in `cache_dir` as a game YAML's would be."""
    if is_tape_path(path):
        snapshot = tape_snapshot(path, cache_dir)
    elif path.suffix.lower() in READERS:
        snapshot = load_snapshot(path)
    else:
        raise DraftError(f"{path}: expected a .z80, .sna or .szx snapshot, or a .tap or .tzx tape")
    machine = ZXSpectrum(snapshot.model)
    machine.load_snapshot(snapshot)
    return machine, snapshot


def _title(stem: str) -> str:
    words = re.split(r"[_\-\s]+", stem)
    return " ".join(w.capitalize() for w in words if w) or stem


def search_definition(
    path: Path, model: str, start: StartProcedure, actions: list[list[str]]
) -> GameDefinition:
    """A bare game for the variable search: the snapshot, the start and the actions."""
    spec = GameSpec.model_validate(
        {
            "name": _title(path.stem),
            "machine": model,
            "snapshot": str(path),
            "routines": {"main_loop": start.main_loop.address},
            "start": start.steps(),
            "actions": actions,
        }
    )
    return GameDefinition(spec, path.with_suffix(".yaml"))


def _nice(value: float) -> float:
    """One significant digit: 0.1, 1, 20, ..."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return float(round(value / power) * power)


def find_random_state(
    machine: ZXSpectrum,
    start: StartProcedure,
    ram: npt.NDArray[np.uint8],
    base: int,
    transitions: npt.NDArray[np.bool_],
    avoid: Sequence[DataVariable] = (),
    frames: int = 200,
) -> VariableGuess | None:
    """The word holding the game's random-number generator state, if one stands out.

    `ram` is RAM from `base` at each recorded step; `transitions` marks the rows that follow
    the row before in the same episode. A generator's state changes both its bytes at once,
    by large steps, to ever new values and never to 0; it is confirmed by writing two other
    values into it before the start procedure: each must change the game's screen some
    `frames` frames later, differently, while the main loop goes on running. Words that
    overlap a variable in `avoid` are not taken.
    """
    taken = {v.address + n for v in avoid for n in range(v.size)}
    low = ram[:, :-1].astype(np.int64)
    high = ram[:, 1:].astype(np.int64)
    words = low | high << 8
    follow = np.asarray(transitions, dtype=bool)[1:]
    low_moves = (np.diff(low, axis=0) != 0)[follow]
    high_moves = (np.diff(high, axis=0) != 0)[follow]
    moves = low_moves | high_moves
    changes = moves.sum(axis=0)
    together = (low_moves & high_moves).sum(axis=0)
    never_zero = (words != 0).all(axis=0)
    plausible = np.flatnonzero((changes >= 5) & (together >= 0.6 * changes) & never_zero)
    ranked = []
    for column in plausible.tolist():
        series = words[:, column]
        step = np.diff(series)[follow][moves[:, column]]
        size = float(np.median(np.abs((step + 0x8000) % 0x10000 - 0x8000)))
        distinct = len(np.unique(series))
        if size >= 256 and distinct >= 0.5 * (changes[column] + 1):
            ranked.append((-int(changes[column]), column))
    for _, column in sorted(ranked)[:3]:
        address = base + column
        if {address, address + 1} & taken:
            continue
        screens = []
        for value in (None, 0x1234, 0xBEEF):
            trial = machine.copy()
            if value is not None:
                trial.write(address, (value & 0xFF, value >> 8))
            start.run(trial)
            trial.run_frames(frames)
            if trial.run_until(start.main_loop.address, 100) is None:
                break
            screens.append(bytes(trial.display_memory()))
        if len(screens) == 3 and len(set(screens)) == 3:
            return VariableGuess(
                DataVariable(address=address, type="word"),
                0.7,
                f"changes both bytes at once at {int(changes[column])} steps, by large steps, "
                "never 0; other values written at the start change the game",
            )
    return None


def draft_game(
    source: str | Path,
    out: str | Path | None = None,
    seed: int = 0,
    search_steps: int = 300,
    play_frames: int = 8000,
) -> Draft:
    """Draft a game definition for the snapshot or tape `source`.

    `out` is where the YAML will be written (the snapshot is named relative to it);
    `search_steps` agent steps are recorded for the score and lives search and up to
    `play_frames` frames of random play for the crash and game-over routines.
    """
    from .memory_search import find_score_and_lives
    from .screen_text import read_numbers

    path = Path(source).resolve()
    if not path.is_file():
        raise DraftError(f"{path}: no such snapshot or tape")
    where = Path(out).resolve().parent if out is not None else path.parent
    machine, snapshot = load_machine(path, where / CACHE_DIR_NAME)
    try:
        named = Path(path).relative_to(where).as_posix()
    except ValueError:
        named = str(path)
    checks: list[str] = []

    start = find_start(machine)
    playing = machine.copy()
    start.run(playing)
    keys = find_keys(playing, start.main_loop.address, seed=seed)
    if not keys.keys:
        raise DraftError("the game reacts to no key it reads; no action set can be drafted")
    actions = keys.actions

    found = find_score_and_lives(
        search_definition(path, snapshot.model, start, actions), steps=search_steps, seed=seed
    )
    score = lives = None
    if found.best_score is not None:
        best = found.best_score
        score = VariableGuess(best.variable, round(best.score, 2), found.score_route)
    if found.best_lives is not None:
        best = found.best_lives
        lives = VariableGuess(best.variable, round(best.score, 2), found.lives_route)

    recording = found.recording
    random_state = find_random_state(
        machine,
        start,
        recording.ram,
        recording.base,
        recording.transitions,
        avoid=[g.variable for g in (score, lives) if g is not None],
    )
    report = find_routines(
        machine,
        actions,
        start=start.frames(),
        restart=[frozenset(start.keys)] * start.press_frames,
        lives=lives.variable if lives is not None else None,
        main_loop=start.main_loop,
        seed=seed,
        max_frames=play_frames,
    )
    events = report.events

    numbers = read_numbers(playing)
    hud = sorted({n.row for n in numbers if n.label is not None})
    x, y, width, height = 0, 0, 256, 192
    if hud and max(hud) <= 2:
        y = 8 * (max(hud) + 1)
        height = 192 - y
    elif hud and min(hud) >= 21:
        height = 8 * min(hud)

    score_reward, lives_penalty = 1.0, 1.0
    if score is not None:
        steps = np.asarray(found.recording.transitions)[1:]
        rise = np.diff(found.score[0].values)[steps]
        rises = [int(d) for d in rise if d > 0]
        if rises:
            score_reward = _nice(1.0 / float(np.median(rises)))
            if lives is not None:
                fall = np.diff(found.lives[0].values)[steps]
                lost = [int(-d) for d in fall if d < 0]
                if lost:
                    per_life = sum(rises) / sum(lost) * score_reward
                    lives_penalty = max(1.0, _nice(per_life))

    others = [n for n in numbers if n.label not in (None, "SCORE", "LIVES")]
    for number in others:
        checks.append(
            f"the screen also shows {number.label} {number.text}: add it to data: if "
            "rewards or episodes should use it (oakemu-rl memory)"
        )
    return Draft(
        name=_title(path.stem),
        snapshot=named,
        machine=snapshot.model,
        start=start,
        keys=keys,
        score=score,
        lives=lives,
        events=events,
        play_area=(x, y, width, height),
        hud_rows=hud,
        score_reward=score_reward,
        lives_penalty=lives_penalty,
        random_state=random_state,
        checks=checks,
    )


# -- writing -----------------------------------------------------------------------------------


def _var_line(name: str, guess: VariableGuess) -> str:
    var = guess.variable
    length = f", length: {var.length}" if var.type in ("bcd", "number_string") else ""
    return f"{name}: {{address: 0x{var.address:04X}, type: {var.type}{length}}}"


def _comment(line: str, note: str, width: int = 52) -> str:
    return f"{line.ljust(width)} # {note}"


def _render(draft: Draft) -> str:
    start, keys = draft.start, draft.keys
    routines = {r.name: r for r in draft.routines}
    crash, game_over = routines.get("crash"), routines.get("game_over")
    checks = [
        "play it: `oakemu-rl inspect THIS.yaml --steps 200 --out shots` and look at the pictures",
        "every confidence below 0.8, and every part marked 'not found'",
        "the rewards: a rise of the score earns score x reward, a lost life costs penalty",
        "a win condition, if the game can be won (episode.win is left empty)",
        "randomize: "
        + (
            "rng_seed is a guess; if it is wrong the game may misbehave after a reset"
            if draft.random_state is not None
            else "no random-number state was found, so every episode starts alike (find "
            "it with oakemu-rl memory and add `- randomize: [name]` to start)"
        ),
        *draft.checks,
    ]
    if draft.lives is None:
        checks.insert(1, "lives were not found: episodes end only on game_over or truncation")
    out: list[str] = [
        f"# Drafted by `oakemu-rl new-game` (OakEmu-RL {__version__}) from {draft.snapshot}",
        "# alone. Every value below is a guess found by playing the game with random keys;",
        "# each comment gives its confidence (0-1: how sure the search is) and why.",
        "# Still to check by hand:",
        *(f"#   - {c}" for c in checks),
        f"name: {draft.name}",
        "description: >-",
        f"  {draft.name}, drafted by oakemu-rl new-game; check every guess before training.",
        f"machine: {draft.machine}",
        f"snapshot: {_quote(draft.snapshot)}",
    ]
    x, y, width, height = draft.play_area
    area = f"play_area: {{x: {x}, y: {y}, width: {width}, height: {height}}}"
    if draft.hud_rows and (y or height != 192):
        rows = ", ".join(map(str, draft.hud_rows))
        out.append(_comment(area, f"the HUD (character row {rows}) is left out"))
    else:
        out.append(_comment(area, "the whole screen: no HUD row was found"))
    out += [
        _comment("frame_skip: 4", "frames per agent step, the action held"),
        _comment("max_episode_steps: 5000", "then the episode is truncated"),
    ]
    data = [("score", draft.score), ("lives", draft.lives)]
    if draft.random_state is not None:
        data.append(("rng_seed", draft.random_state))
    if any(guess for _, guess in data):
        out.append("data:")
    for name, guess in data:
        if guess is None:
            out.append(f"  # {name}: not found")
            continue
        note = f"confidence {guess.confidence:.2f}: {guess.how}"
        out.append(_comment("  " + _var_line(name, guess), note))
    out.append("routines:")
    for routine in (start.main_loop, crash, game_over):
        if routine is not None:
            note = f"confidence {routine.confidence:.2f}: {routine.evidence}"
            out.append(_comment("  " + routine.yaml_entry(), note))
    for name, routine in (("crash", crash), ("game_over", game_over)):
        if routine is None:
            out.append(f"  # {name}: not found")
    title = f"HALT at 0x{start.title_halt:04X}" if start.title_halt is not None else "the title"
    tried = f"after {', '.join(start.tried)} did nothing" if start.tried else "the first key tried"
    out.append("start:")
    if draft.random_state is not None:
        out.append(
            _comment(
                "  - randomize: [rng_seed]",
                f"confidence {draft.random_state.confidence:.2f}: a new game each episode",
            )
        )
    out += [
        _comment(f"  - wait: {start.wait}", f"the title settles ({title})"),
        _comment(
            f"  - press: [{', '.join(start.keys)}]",
            f"confidence {start.confidence:.2f}: starts the game ({tried})",
        ),
        f"    frames: {start.press_frames}",
        "  - run_until: main_loop",
        _comment(
            f"    timeout_frames: {start.timeout_frames}",
            f"reached {start.frames_to_loop} frames after the press",
        ),
    ]
    reads = (
        ", ".join(f"{'+'.join(k for k in row)}" for row in _rows_read(keys))
        or "several rows at once"
    )
    kempston = "; Kempston too" if keys.reads.kempston else ""
    if keys.reads.rom:
        kempston += " (through the ROM)"
    out.append(_comment("actions:", f"the game reads half-rows {reads}{kempston}"))
    for action in keys.actions:
        if not action:
            note = "no key"
        elif len(action) == 1:
            note = f"confidence {keys.confidence(action[0]):.2f}: changes the screen"
        else:
            note = "the two together do what neither does alone"
        out.append(_comment(f"  - [{', '.join(action)}]", note))
    if keys.alternatives:
        out.append(f"  # {', '.join(keys.alternatives)} act as well (a joystick alternative)")
    if keys.control:
        out.append(f"  # {', '.join(keys.control)} stop the main loop (pause or quit): left out")
    out.append("reward:")
    variables = []
    if draft.score is not None:
        variables.append(
            _comment(
                f"    score: {{reward: {draft.score_reward:g}}}",
                "guess: the score's typical rise earns about 1",
            )
        )
    if draft.lives is not None:
        variables.append(
            _comment(
                f"    lives: {{penalty: {draft.lives_penalty:g}}}",
                "guess: about what random play scores per life",
            )
        )
    if variables:
        out += ["  variables:", *variables]
    out.append("  time: 0.0")
    loss = []
    if draft.lives is not None:
        loss.append("{variable: lives, op: zero}")
    if game_over is not None:
        loss.append("{event: game_over}")
    out.append("episode:")
    out.append("  win: []                                             # none found: add one")
    out.append(f"  loss: [{', '.join(loss)}]")
    return "\n".join(out) + "\n"


def _rows_read(keys: GameKeys) -> list[tuple[str, ...]]:
    from ..emulator.keyboard import HALF_ROWS

    return [HALF_ROWS[row] for row in sorted(keys.reads.half_rows)]


def _quote(text: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./\-]+", text):
        return text
    return "'" + text.replace("'", "''") + "'"


def write_draft(draft: Draft, out: str | Path) -> Path:
    """Check the drafted YAML parses as a game definition, then write it to `out`."""
    path = Path(out)
    text = draft.to_yaml()
    parse_game(read_game_yaml(text, path), path)
    path.write_text(text, encoding="utf-8")
    return path
