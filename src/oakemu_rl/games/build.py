"""Assemble the bundled games and wrap them in 48K .sna snapshots, reproducibly.

    python -m oakemu_rl.games.build [--check] [GAME...]

Each folder under `bundled/` that holds `<name>.asm` is assembled with pasmo
(`pasmo --alocal --bin`) and the binary is placed in an otherwise all-zero
48 KiB RAM image at the address of its `image_start` label. The snapshot starts
at the `start` label with SP at `stack_top`, interrupts disabled and IM 1 (the
program sets up its own interrupt mode), border black, R = 0. Nothing depends
on the time or the machine, so the same source always gives the same bytes.

The helper routines the games share (screen addresses, printing, the RNG...) are
in `bundled/common/*.asm`, which the games `INCLUDE "../common/<file>.asm"`.
pasmo resolves an INCLUDE path against its current directory (not against the
including file), so pasmo always runs in the game's folder, whatever the
caller's current directory. `common` holds no `common.asm`, so it is no game.

`--check` rebuilds into a temporary folder and compares each snapshot with the
committed one byte for byte (exit status 1 on a difference). Without pasmo the
command says how to install it and exits with status 2.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from oakemu_rl.emulator.snapshots.model import PAGE_SIZE, Registers, Snapshot
from oakemu_rl.emulator.snapshots.sna import write_sna

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
RAM_START = 0x4000
RAM_SIZE = 3 * PAGE_SIZE

PASMO_MISSING = "pasmo not found: install it with `apt-get install pasmo`"

# One line of pasmo's symbol file: "name<TAB>EQU 08000H".
_SYMBOL_LINE = re.compile(r"^([A-Za-z_.?@$][\w.?@$]*)\s+EQU\s+([0-9A-Fa-f]+)H\s*$")


class BuildError(Exception):
    """A game could not be assembled or wrapped; the message says why."""


def find_pasmo() -> str | None:
    """The path of the pasmo assembler, or None when it is not installed."""
    return shutil.which("pasmo")


def game_folders(names: Sequence[str] = ()) -> list[Path]:
    """The bundled game folders that hold an .asm source (all of them, or those named)."""
    folders = sorted(p.parent for p in BUNDLED_DIR.glob("*/*.asm") if p.stem == p.parent.name)
    if not names:
        return folders
    by_name = {f.name: f for f in folders}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise BuildError(
            f"unknown game(s) {', '.join(unknown)}; bundled games with a source: "
            f"{', '.join(by_name) or '(none)'}"
        )
    return [by_name[n] for n in names]


def parse_symbols(text: str) -> dict[str, int]:
    """Parse pasmo's symbol listing (`name EQU 0ABCDH` lines) into a dict.

    pasmo lists local labels under generated numeric names; those are skipped.
    """
    symbols: dict[str, int] = {}
    for line in text.splitlines():
        match = _SYMBOL_LINE.match(line.strip())
        if match:
            symbols[match.group(1)] = int(match.group(2), 16)
    return symbols


def assemble(source: Path, workdir: Path, pasmo: str | None = None) -> tuple[bytes, dict[str, int]]:
    """Run pasmo on `source`; return the binary and the symbol table."""
    pasmo = pasmo or find_pasmo()
    if pasmo is None:
        raise BuildError(PASMO_MISSING)
    workdir = Path(workdir).resolve()  # pasmo runs in another folder
    binary = workdir / f"{source.stem}.bin"
    symbols = workdir / f"{source.stem}.sym"
    # In the source's folder: pasmo finds INCLUDE files relative to the current directory.
    result = subprocess.run(
        [pasmo, "--alocal", "--bin", source.name, str(binary), str(symbols)],
        cwd=source.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise BuildError(
            f"pasmo failed on {source} (exit {result.returncode}):\n"
            f"{(result.stderr + result.stdout).strip()}"
        )
    return binary.read_bytes(), parse_symbols(symbols.read_text())


def make_snapshot(binary: bytes, symbols: dict[str, int], source: Path) -> Snapshot:
    """Place the binary in a zeroed 48K RAM image and set the entry registers."""
    for needed in ("image_start", "start", "stack_top"):
        if needed not in symbols:
            raise BuildError(f"{source}: the source must define the label `{needed}`")
    base = symbols["image_start"]
    if base < RAM_START or base + len(binary) > RAM_START + RAM_SIZE:
        raise BuildError(
            f"{source}: the program occupies 0x{base:04X}-0x{base + len(binary) - 1:04X}, "
            f"outside RAM (0x4000-0xFFFF)"
        )
    memory = bytearray(RAM_SIZE)
    memory[base - RAM_START : base - RAM_START + len(binary)] = binary
    sp = symbols["stack_top"]
    if not RAM_START + 2 <= sp <= 0xFFFF:
        raise BuildError(f"{source}: stack_top 0x{sp:04X} is not in RAM")
    registers = Registers(sp=sp, pc=symbols["start"], iff1=False, iff2=False, im=1)
    return Snapshot.from_48k_memory(bytes(memory), registers, border=0)


def build_game(folder: Path, out: Path) -> Path:
    """Assemble `folder/<name>.asm` and write `<name>.sna` into the folder `out`.

    Returns the path of the snapshot written.
    """
    folder = Path(folder)
    source = folder / f"{folder.name}.asm"
    if not source.is_file():
        raise BuildError(f"{folder}: no source file {source.name}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="oakemu-build-") as tmp:
        binary, symbols = assemble(source, Path(tmp))
    snapshot = make_snapshot(binary, symbols, source)
    target = out / f"{folder.name}.sna"
    target.write_bytes(write_sna(snapshot))
    return target


def game_symbols(folder: Path) -> dict[str, int]:
    """Assemble a game and return its symbol table (for checking its YAML addresses)."""
    folder = Path(folder)
    with tempfile.TemporaryDirectory(prefix="oakemu-build-") as tmp:
        _, symbols = assemble(folder / f"{folder.name}.asm", Path(tmp))
    return symbols


def check_game(folder: Path) -> str | None:
    """Rebuild a game in a temporary folder; None when it matches the committed
    snapshot byte for byte, otherwise a message saying what differs."""
    committed = folder / f"{folder.name}.sna"
    with tempfile.TemporaryDirectory(prefix="oakemu-check-") as tmp:
        fresh = build_game(folder, Path(tmp)).read_bytes()
    if not committed.is_file():
        return f"{committed} is missing; run `python -m oakemu_rl.games.build {folder.name}`"
    old = committed.read_bytes()
    if old == fresh:
        return None
    if len(old) != len(fresh):
        detail = f"{len(old)} bytes committed, {len(fresh)} rebuilt"
    else:
        first = next(i for i, (a, b) in enumerate(zip(old, fresh, strict=True)) if a != b)
        detail = f"first difference at file offset {first}"
    return (
        f"{committed} differs from a fresh build ({detail}); "
        f"run `python -m oakemu_rl.games.build {folder.name}` and commit the result"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m oakemu_rl.games.build",
        description="Assemble the bundled games (pasmo) into 48K .sna snapshots.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="rebuild into a temporary folder and compare with the committed snapshots",
    )
    parser.add_argument("games", nargs="*", metavar="GAME", help="game folder names (default: all)")
    args = parser.parse_args(argv)

    if find_pasmo() is None:
        print(PASMO_MISSING, file=sys.stderr)
        return 2
    try:
        folders = game_folders(args.games)
        if not folders:
            print(f"no game sources found under {BUNDLED_DIR}", file=sys.stderr)
            return 1
        failures = 0
        for folder in folders:
            if args.check:
                problem = check_game(folder)
                if problem:
                    print(problem, file=sys.stderr)
                    failures += 1
                else:
                    print(f"{folder.name}: snapshot is up to date")
            else:
                target = build_game(folder, folder)
                print(f"{folder.name}: wrote {target}")
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
