"""Routines and keys found by watching a game play (oakemu_rl.discovery.routines, .keys).

The bundled games are searched from their snapshots; their YAMLs (whose addresses come from
the assembler's symbol table) are only read afterwards, to check what was found.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from oakemu_rl.cli.main import main
from oakemu_rl.discovery.draft import find_start
from oakemu_rl.discovery.keys import find_keys, record_port_reads
from oakemu_rl.discovery.routines import (
    address_spans,
    find_event_routines,
    find_main_loop,
    find_routines,
    record_play,
)
from oakemu_rl.emulator import Registers, Snapshot
from oakemu_rl.emulator.machine import ZXSpectrum
from oakemu_rl.games.loader import BUNDLED_DIR, load_game
from z80_programs import RESULTS, counter_with_routine, port_reader, snapshot_48k

# The YAML's name for the routine that runs when a life is lost.
CRASH_NAME = {"catch": "miss", "forest_run": "crash"}


def machine_for(program: bytes, **registers: int) -> ZXSpectrum:
    machine = ZXSpectrum("48k")
    machine.load_snapshot(snapshot_48k(program, **registers))
    return machine


def bundled_snapshot(game: str, tmp_path: Path) -> ZXSpectrum:
    """The game's snapshot, copied away from its YAML, loaded."""
    copy = tmp_path / f"{game}.sna"
    shutil.copy(BUNDLED_DIR / game / f"{game}.sna", copy)
    machine = ZXSpectrum("48k")
    machine.load_snapshot(copy)
    return machine


# -- the emulator's tracing -------------------------------------------------------------------


def test_trace_frame_reports_each_arrival_on_a_copy() -> None:
    machine = machine_for(counter_with_routine())
    tracer = machine.copy()
    frames = [tracer.trace_frame([range(0x8100, 0x8120)] if n == 0 else []) for n in range(12)]
    # the frame routine at 0x8100 runs once a frame, the 'rare' one (0x8110) every 4th frame
    assert [f.count(0x8100) for f in frames[1:]] == [1] * 11
    assert sum(0x8110 in f for f in frames) == 3
    assert all(0x8002 not in f for f in frames)  # outside the watched range
    # the copy ran 12 frames; the original is where it was and runs unmarked
    assert tracer.frame_count == machine.frame_count + 12
    assert machine.run_frames(12) == []
    assert machine.read(0x4000, 0x10000 - 0x4000) == tracer.read(0x4000, 0x10000 - 0x4000)


def test_port_read_hook_sees_keyboard_rows_and_kempston() -> None:
    machine = machine_for(port_reader())
    seen: list[tuple[int, int]] = []
    after: list[int] = []

    def hook(port: int, value: int) -> None:
        seen.append((port, value))
        after.append(machine.register("pc"))

    machine.set_port_read_hook(hook)
    machine.set_keys(["P", "KEMPSTON_FIRE"])
    machine.run_frames(1)
    assert after[0] == 0x8006  # just after the first IN A,(C), at 0x8004
    ports = {port for port, _ in seen}
    assert {0xFEFE, 0xFDFE, 0xFBFE, 0xF7FE, 0xEFFE, 0xDFFE, 0xBFFE, 0x7FFE} <= ports
    assert (0xDFFE, 0xBE) in seen  # P is bit 0 of half-row 5, pulled low
    assert any(port & 0xFF == 0x1F and value == 0x10 for port, value in seen)
    machine.set_port_read_hook(None)
    seen.clear()
    machine.run_frames(1)
    assert seen == []
    reads = record_port_reads(machine_for(port_reader()), frames=2)
    assert sorted(reads.half_rows) == list(range(8)) and reads.kempston > 0
    assert len(reads.candidate_keys()) == 45


def test_address_spans() -> None:
    assert address_spans([5, 3, 4, 9, 10, 1]) == [range(1, 2), range(3, 6), range(9, 11)]
    assert address_spans([]) == []


# -- the main loop ------------------------------------------------------------------------------


def test_main_loop_of_a_game_that_never_halts() -> None:
    """It spins until the ROM's interrupt moves FRAMES on, then runs its body once."""
    program = bytes([
        0xFB,  # 8000 EI
        0x21, 0x78, 0x5C,  # 8001 LD HL,FRAMES
        0x7E,  # 8004 LD A,(HL)
        0xBE,  # 8005 CP (HL)
        0x28, 0xFD,  # 8006 JR Z,8005
        0x21, RESULTS & 0xFF, RESULTS >> 8,  # 8008 LD HL,RESULTS (the body)
        0x34,  # 800B INC (HL)
        0xC3, 0x01, 0x80,  # 800C JP 8001
    ])  # fmt: skip
    memory = bytearray(0xC000)
    memory[0x4000 : 0x4000 + len(program)] = program
    machine = ZXSpectrum("48k")
    registers = Registers(pc=0x8000, sp=0xFF00, im=1, iy=0x5C3A)
    machine.load_snapshot(Snapshot.from_48k_memory(bytes(memory), registers))
    machine.run_frames(3)
    found = find_main_loop(machine)
    assert found is not None and found.address == 0x8008
    assert 0 < found.confidence <= 0.5  # weaker evidence than a HALT


def test_main_loop_of_a_halting_game() -> None:
    machine = machine_for(counter_with_routine())
    machine.run_frames(2)
    found = find_main_loop(machine)
    assert found is not None and found.address == 0x8001  # the HALT
    assert found.confidence >= 0.95


def rom_machine(program: bytes) -> ZXSpectrum:
    """A program in IM 1, so that the 48K ROM's interrupt counts FRAMES and scans the keys."""
    memory = bytearray(0xC000)
    memory[0x4000 : 0x4000 + len(program)] = program
    memory[0x1C00:0x1C08] = b"\xff" * 8  # KSTATE: no key pending
    machine = ZXSpectrum("48k")
    registers = Registers(pc=0x8000, sp=0xFF00, im=1, iy=0x5C3A)
    machine.load_snapshot(Snapshot.from_48k_memory(bytes(memory), registers))
    return machine


def test_start_of_a_game_that_never_halts() -> None:
    """The title spins reading SPACE; the game spins on FRAMES and counts frames on screen."""
    machine = rom_machine(bytes([
        0xFB,  # 8000 EI
        0x3E, 0x7F,  # 8001 LD A,0x7F (title)
        0xDB, 0xFE,  # 8003 IN A,(0xFE)
        0x1F,  # 8005 RRA
        0x38, 0xF9,  # 8006 JR C,8001
        0x21, 0x78, 0x5C,  # 8008 LD HL,FRAMES (game)
        0x7E,  # 800B LD A,(HL)
        0xBE,  # 800C CP (HL)
        0x28, 0xFD,  # 800D JR Z,800C
        0x21, 0x00, 0x40,  # 800F LD HL,0x4000
        0x34,  # 8012 INC (HL)
        0x18, 0xF3,  # 8013 JR 8008
    ]))  # fmt: skip
    start = find_start(machine)
    assert start.keys == ("SPACE",) and start.title_halt is None
    assert start.main_loop.address == 0x800F


def test_keys_read_through_the_rom() -> None:
    """A program that shows LAST_K, which the ROM's interrupt sets: its own code reads no
    port, so the ROM's reads are taken, and every key that makes a code acts."""
    machine = rom_machine(bytes([
        0xFB,  # 8000 EI
        0x76,  # 8001 HALT
        0x3A, 0x08, 0x5C,  # 8002 LD A,(LAST_K)
        0x32, 0x00, 0x40,  # 8005 LD (0x4000),A
        0x18, 0xF7,  # 8008 JR 8001
    ]))  # fmt: skip
    machine.run_frames(3)
    keys = find_keys(machine, 0x8001)
    assert keys.reads.rom and sorted(keys.reads.half_rows) == list(range(8))
    assert len(keys.keys) == 38 and "CAPS_SHIFT" not in keys.keys  # a shift alone is no code
    assert keys.keys[-4:] == ["SPACE", "0", "M", "ENTER"]  # fire-like keys last
    assert keys.pairs == []  # too many keys act to try their pairs


@pytest.mark.parametrize("game", ["catch", "forest_run"])
def test_start_main_loop_and_keys_from_the_snapshot(game: str, tmp_path: Path) -> None:
    machine = bundled_snapshot(game, tmp_path)
    start = find_start(machine)
    assert start.keys == ("SPACE",) and start.tried == ()
    spec = load_game(game).spec
    assert start.main_loop.address == spec.routines["main_loop"]  # exactly
    assert start.main_loop.confidence >= 0.9
    playing = machine.copy()
    start.run(playing)
    assert playing.register("pc") == spec.routines["main_loop"]
    keys = find_keys(playing, start.main_loop.address)
    assert sorted(map(sorted, keys.actions)) == sorted(map(sorted, spec.actions))
    assert keys.actions == [list(a) for a in spec.actions]  # the YAML's order too
    # the games read half-rows P-Y and SPACE-B and a Kempston joystick, which acts as well
    assert sorted(keys.reads.half_rows) == [5, 7] and keys.reads.kempston
    assert {"KEMPSTON_LEFT", "KEMPSTON_RIGHT"} <= set(keys.alternatives)
    assert all(keys.confidence(k) == 1.0 for k in keys.keys)


# -- crash and game over -------------------------------------------------------------------


@pytest.mark.parametrize("game", ["catch", "forest_run"])
def test_crash_and_game_over_routines(game: str, tmp_path: Path) -> None:
    """With the lives variable known, the routines are the YAML's, to the byte."""
    spec = load_game(game).spec
    machine = bundled_snapshot(game, tmp_path)
    start = [frozenset()] * 5 + [frozenset({"SPACE"})] * 2
    report = find_routines(
        machine, spec.actions, start=start, lives=spec.data["lives"], max_frames=6000
    )
    events = report.events
    assert report.main_loop.address == spec.routines["main_loop"]
    assert len(events.life_losses) >= 6 and len(events.game_overs) >= 2
    assert events.crash is not None and events.game_over is not None
    assert events.crash.address == spec.routines[CRASH_NAME[game]]
    assert events.game_over.address == spec.routines["game_over"]
    assert events.crash.confidence >= 0.8 and events.game_over.confidence >= 0.6
    assert events.crash.yaml_entry() == f"crash: 0x{spec.routines[CRASH_NAME[game]]:04X}"


def test_given_moments_find_the_routine_that_runs_there(tmp_path: Path) -> None:
    """Moments given by the caller (here: where catch's score rose) pick out the code that
    runs only then: the 'catch' routine, and none when the moments are random frames."""
    spec = load_game("catch").spec
    machine = bundled_snapshot("catch", tmp_path)
    start = [frozenset()] * 5 + [frozenset({"SPACE"})] * 2
    recording = record_play(
        machine, spec.routines["main_loop"], spec.actions, start=start, max_frames=2500, seed=3
    )
    replay = recording.machine()
    score = spec.data["score"]
    values = []
    for played in recording.frames:
        replay.set_keys(played.keys)
        replay.run_frames(1)
        values.append(int(replay.read(score.address, score.size).decode()))
    rises = [n for n in range(1, len(values)) if values[n] > values[n - 1]]
    assert len(rises) >= 3
    found = find_event_routines(recording, life_losses=rises, game_overs=[])
    assert found.crash is not None and found.crash.address == spec.routines["catch"]
    assert found.game_over is None
    unrelated = find_event_routines(recording, life_losses=[400, 1100, 1900], game_overs=[])
    assert unrelated.crash is None or unrelated.crash.confidence < 0.5


def test_routines_command_on_a_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["routines", "catch", "--frames", "4000"]) == 0
    out = capsys.readouterr().out
    assert "main_loop: 0x81AC" in out and "crash: 0x8230" in out and "game_over: 0x8242" in out
    assert "miss (the same)" in out


def test_routines_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["routines", str(tmp_path / "none.sna")]) == 2
    assert "no such snapshot" in capsys.readouterr().err
    assert main(["routines", "catch", "--lives", "0x8006:dword"]) == 2
    assert "--lives 0x8006:dword" in capsys.readouterr().err


def test_without_life_moments_only_the_game_over_is_found(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--lives naming a byte that never changes: no life is lost, so no crash routine; the
    games still end (the title comes back), which finds game_over."""
    assert main(["routines", "catch", "--frames", "4000", "--lives", "0x9000"]) == 0
    out = capsys.readouterr().out
    assert "0 lives lost" in out and "# crash: not found" in out
    assert "game_over: 0x8242" in out


def test_routines_command_on_a_tape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """From a tape alone (catch assembled by pasmo with a BASIC loader that runs it): the start,
    the keys and the lives are found first, then the routines."""
    if shutil.which("pasmo") is None:
        pytest.skip("pasmo is not installed (apt-get install pasmo)")
    # The game's folder beside the shared helpers it includes (../common/), as in the package.
    shutil.copytree(BUNDLED_DIR / "common", tmp_path / "common")
    (tmp_path / "catch").mkdir()
    source = tmp_path / "catch" / "catch.asm"
    source.write_text((BUNDLED_DIR / "catch" / "catch.asm").read_text() + "\n        end start\n")
    tape = tmp_path / "catch.tap"
    subprocess.run(
        ["pasmo", "--alocal", "--tapbas", str(source), str(tape)],
        check=True,
        capture_output=True,
        cwd=source.parent,
    )
    assert main(["routines", str(tape), "--frames", "4000"]) == 0
    out = capsys.readouterr().out
    assert "then SPACE" in out and "action keys: O, P" in out
    assert "lives: {address: 0x8006, type: number_string, length: 1}" in out
    assert "main_loop: 0x81AC" in out and "crash: 0x8230" in out and "game_over: 0x8242" in out
