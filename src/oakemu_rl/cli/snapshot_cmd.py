"""`oakemu-rl snapshot TAPE --out game.z80`: load a tape through the ROM and save a snapshot."""

from __future__ import annotations

import argparse
from pathlib import Path

from .errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "snapshot",
        help="load a tape (.tap/.tzx) into a 48K Spectrum and save it as a snapshot",
        description='Switch on a 48K Spectrum, LOAD "" the tape (instantly where the ROM '
        "reads it, in real time where the program's own loader does), optionally hold keys "
        "for some frames, and save the machine as a .z80, .sna or .szx snapshot.",
    )
    parser.add_argument("tape", type=Path, metavar="TAPE", help="the .tap or .tzx file")
    parser.add_argument(
        "--out", type=Path, required=True, help="the snapshot to write: .z80, .sna or .szx"
    )
    parser.add_argument(
        "--press",
        default="",
        metavar="KEYS",
        help="keys to hold after loading, joined with '+' (e.g. SPACE or SYMBOL_SHIFT+P)",
    )
    parser.add_argument(
        "--frames",
        type=int,
        default=0,
        metavar="N",
        help="frames to run after loading, holding the --press keys (default 0)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..emulator import ZXSpectrum, canonical_key, save_snapshot
    from ..emulator.keyboard import UnknownKeyError
    from ..emulator.snapshots import WRITERS
    from ..emulator.tape import load_tape
    from ..emulator.tape.loader import run_out_of_halt

    if args.out.suffix.lower() not in WRITERS:
        raise UsageError(
            f"--out {args.out}: unknown snapshot format {args.out.suffix!r}; expected "
            f"{', '.join(WRITERS)}"
        )
    if not args.out.parent.is_dir():
        raise UsageError(f"--out {args.out}: the folder {args.out.parent} does not exist")
    try:
        keys = [canonical_key(k) for k in args.press.split("+") if k.strip()]
    except UnknownKeyError as exc:
        raise UsageError(f"--press {args.press}: {exc}") from None
    if args.frames < 0:
        raise UsageError(f"--frames {args.frames}: expected 0 or more frames")
    if keys and not args.frames:
        raise UsageError(f"--press {args.press}: give --frames N, how long to hold the keys")

    loaded = load_tape(args.tape)
    snapshot = loaded.snapshot
    if args.frames:
        machine = ZXSpectrum("48k")
        machine.load_snapshot(snapshot)
        machine.set_keys(keys)
        machine.run_frames(args.frames)
        machine.set_keys(())
        run_out_of_halt(machine)
        snapshot = machine.to_snapshot()
    save_snapshot(snapshot, args.out)
    how = [f"{len(loaded.trapped)} block(s) through the ROM trap"]
    if loaded.played:
        how.append(f"{len(loaded.played)} in real time")
    state = "running at" if loaded.started else "BASIC waiting for a key at"
    after = f", then {args.frames} frames" + (f" holding {'+'.join(keys)}" if keys else "")
    print(
        f"{args.out}: {args.tape} loaded ({', '.join(how)}; {loaded.frames} frames, "
        f"{state} 0x{loaded.snapshot.registers.pc:04X}){after if args.frames else ''}"
    )
    return 0
