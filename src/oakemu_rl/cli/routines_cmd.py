"""`oakemu-rl routines GAME_OR_SNAPSHOT`: find the main loop, crash and game-over routines."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .arguments import non_negative_int
from .errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from ..discovery.routines import RoutineCandidate, RoutineReport
    from ..games.schema import DataVariable


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "routines",
        help="find a game's main loop, crash and game-over routines by watching it play",
        description="Play the game with random keys and watch its program counter: the HALT "
        "it waits in every frame is the main loop; code that runs only near the moments the "
        "lives fall is the crash routine, only when a game ends the game-over routine. Prints "
        "`routines:` entries for a game YAML, each with a confidence.",
    )
    parser.add_argument(
        "game",
        metavar="GAME_OR_SNAPSHOT",
        help="a bundled game, a game YAML, or a snapshot/tape (then the start key, the "
        "action keys and the lives are found first)",
    )
    parser.add_argument(
        "--lives",
        metavar="ADDR[:TYPE[:LENGTH]]",
        help="the lives variable, e.g. 0x8006:number_string:1 (default: the YAML's `lives`, "
        "or searched for)",
    )
    parser.add_argument(
        "--frames",
        type=non_negative_int,
        default=8000,
        help="at most this many frames of random play (default 8000)",
    )
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed for random play")
    parser.set_defaults(handler=run)


def parse_variable(text: str, option: str = "--lives") -> DataVariable:
    """ADDR[:TYPE[:LENGTH]] (type default byte) as a data variable."""
    from pydantic import ValidationError

    from ..games.schema import DataVariable, clean_message

    parts = text.split(":")
    if len(parts) > 3:
        raise UsageError(f"{option} {text}: expected ADDR[:TYPE[:LENGTH]]")
    try:
        address = int(parts[0], 0)
        length = int(parts[2]) if len(parts) > 2 else None
    except ValueError:
        raise UsageError(
            f"{option} {text}: expected ADDR[:TYPE[:LENGTH]] with a number for the address "
            "(0x8006 or 32774) and the length"
        ) from None
    kind = parts[1] if len(parts) > 1 else "byte"
    try:
        return DataVariable.model_validate({"address": address, "type": kind, "length": length})
    except ValidationError as exc:
        raise UsageError(f"{option} {text}: {clean_message(exc.errors()[0]['msg'])}") from None


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..discovery.draft import DraftError, find_start, load_machine, search_definition
    from ..discovery.keys import find_keys
    from ..discovery.memory_search import find_score_and_lives
    from ..discovery.routines import apply_randomize, find_routines, start_frames
    from ..emulator.machine import ZXSpectrum
    from ..emulator.snapshots import READERS
    from ..emulator.tape import CACHE_DIR_NAME, is_tape_path
    from ..games.loader import load_game
    from ..games.schema import PressStep, RandomizeStep

    console = Console()
    lives = parse_variable(args.lives) if args.lives else None
    path = Path(args.game)
    known: dict[str, int] = {}
    main_loop: RoutineCandidate | None = None
    if path.suffix.lower() in READERS or is_tape_path(path):
        if not path.is_file():
            raise UsageError(f"{path}: no such snapshot or tape")
        path = path.resolve()
        try:
            machine, _ = load_machine(path, path.parent / CACHE_DIR_NAME)
            start = find_start(machine)
        except DraftError as exc:
            raise UsageError(str(exc)) from None
        console.print(
            f"start: {start.wait} frames, then {'+'.join(start.keys)} for "
            f"{start.press_frames} frames"
        )
        playing = machine.copy()
        start.run(playing)
        keys = find_keys(playing, start.main_loop.address, seed=args.seed)
        actions = keys.actions
        console.print(f"action keys: {', '.join(keys.keys) or 'none found'}")
        if lives is None:
            found = find_score_and_lives(
                search_definition(path, machine.model, start, actions), steps=300, seed=args.seed
            )
            best = found.best_lives
            if best is not None:
                lives = best.variable
                console.print(
                    f"{best.yaml_entry('lives')} ({found.lives_route}, confidence "
                    f"{best.score:.2f})",
                    markup=False,
                )
            else:
                console.print("lives: not found")
        frames = start.frames()
        restart = [frozenset(start.keys)] * start.press_frames
        main_loop = start.main_loop
    else:
        game = load_game(args.game)
        spec = game.spec
        known = dict(spec.routines)
        machine = ZXSpectrum(spec.machine)
        machine.load_snapshot(game.snapshot)
        for step in spec.start:
            if isinstance(step, RandomizeStep):
                apply_randomize(machine, step, spec.data, args.seed)
        actions = [list(a) for a in spec.actions]
        lives = lives or spec.data.get("lives")
        frames = start_frames(spec.start)
        press = next((s for s in spec.start if isinstance(s, PressStep)), None)
        restart = [frozenset(press.press)] * press.frames if press else [frozenset({"SPACE"})] * 2
    try:
        report = find_routines(
            machine,
            actions,
            start=frames,
            restart=restart,
            lives=lives,
            main_loop=main_loop,
            seed=args.seed,
            max_frames=args.frames,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _print(console, report, lives is not None, known)
    return 0


def _print(console: Console, report: RoutineReport, lives: bool, known: dict[str, int]) -> None:
    from rich.table import Table

    events = report.events
    console.print(
        f"{events.frames} frames of random play: {len(events.life_losses)} lives lost, "
        f"{len(events.game_overs)} games ended"
        + ("" if lives else " (no lives variable, so no crash moments: give --lives)")
    )
    table = Table(title="Routines")
    for column in ("name", "address", "confidence", "evidence"):
        table.add_column(column)
    if known:
        table.add_column("in the YAML")
    for routine in report.candidates:
        row = [routine.name, f"0x{routine.address:04X}", f"{routine.confidence:.2f}"]
        row.append(routine.evidence)
        if known:
            row.append(_nearest(routine.address, known))
        table.add_row(*row)
    console.print(table)
    names = {r.name for r in report.candidates}
    lines = ["routines:"]
    lines += [f"  {r.yaml_entry():24}# confidence {r.confidence:.2f}" for r in report.candidates]
    lines += [f"  # {name}: not found" for name in ("crash", "game_over") if name not in names]
    console.print("\n".join(lines), markup=False, highlight=False)


def _nearest(address: int, known: dict[str, int]) -> str:
    name, there = min(known.items(), key=lambda item: abs(item[1] - address))
    gap = address - there
    if gap == 0:
        return f"{name} (the same)"
    return f"{name} 0x{there:04X} ({gap:+d} bytes)"
