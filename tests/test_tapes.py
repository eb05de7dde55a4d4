"""Tapes (.tap, .tzx): parsing, loading through the 48K ROM (trap and real time), the cache,
games whose `snapshot:` is a tape, and `oakemu-rl snapshot`.

The tapes are made from the bundled games by pasmo (`--tapbas`) and by fuse-utils'
`snap2tzx`; `tzxlist` and `snapdump`/`snapconv` are the oracles. Tests that need one of
these tools skip without it.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from oakemu_rl.cli.main import main
from oakemu_rl.emulator import ZXSpectrum, load_snapshot
from oakemu_rl.emulator.snapshots import Registers, Snapshot
from oakemu_rl.emulator.tape import (
    TapeError,
    cache_file,
    load_tape,
    read_tape,
    tape_snapshot,
)
from oakemu_rl.emulator.tape import cache as tape_cache
from oakemu_rl.emulator.tape.formats import standard_block
from oakemu_rl.emulator.tape.signal import TapePlayer, TapeSignal
from oakemu_rl.games.build import BUNDLED_DIR, assemble
from oakemu_rl.games.errors import GameDefinitionError
from oakemu_rl.games.loader import load_game
from oakemu_rl.games.session import GameSession

CATCH = BUNDLED_DIR / "catch"


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (apt-get install pasmo fuse-emulator-utils)")
    return path


def run_tool(*args: str | Path, cwd: Path | None = None) -> str:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, check=False, cwd=cwd
    )
    assert result.returncode == 0, f"{args[0]} failed: {result.stderr}{result.stdout}"
    return result.stdout


# -- tapes of the bundled game ----------------------------------------------------------


@pytest.fixture(scope="module")
def catch_build(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """catch.asm assembled: its binary and symbols, a plain `pasmo --tapbas` tape (its BASIC
    loader only loads the code) and one whose loader runs it (`end start` added)."""
    need("pasmo")
    # The game's folder beside the shared helpers it includes (../common/), as in the package.
    folder = tmp_path_factory.mktemp("games") / "catch"
    folder.mkdir()
    shutil.copytree(CATCH.parent / "common", folder.parent / "common")
    source = folder / "catch.asm"
    shutil.copy(CATCH / "catch.asm", source)
    binary, symbols = assemble(source, folder)
    run_tool("pasmo", "--alocal", "--tapbas", source, folder / "catch.tap", cwd=folder)
    runs = folder / "catch_run.asm"
    runs.write_text(source.read_text() + "\n        end start\n")
    run_tool("pasmo", "--alocal", "--tapbas", runs, folder / "catch_run.tap", cwd=folder)
    return {
        "binary": binary, "symbols": symbols, "tap": folder / "catch.tap",
        "run_tap": folder / "catch_run.tap", "folder": folder,
    }  # fmt: skip


def program_bytes(snapshot: Snapshot, build: dict[str, Any]) -> bytes:
    start = build["symbols"]["image_start"]
    memory = snapshot.memory_48k()
    return memory[start - 0x4000 : start - 0x4000 + len(build["binary"])]


def tzxlist_blocks(path: Path) -> list[tuple[int, int | None]]:
    """(block id, data length) for each block `tzxlist` lists."""
    out = run_tool(need("tzxlist"), path)
    blocks: list[tuple[int, int | None]] = []
    for chunk in re.split(r"--= Block #\d+ =--", out)[1:]:
        kind = re.search(r"Block type 0x([0-9a-fA-F]{2})", chunk)
        assert kind is not None, f"tzxlist printed a block without a type: {chunk}"
        length = re.search(r"(?:Block|Data) length: (\d+) bytes", chunk)
        blocks.append((int(kind.group(1), 16), int(length.group(1)) if length else None))
    return blocks


def our_blocks(path: Path) -> list[tuple[int, int | None]]:
    return [(b.block_id, len(b.data) if b.is_data else None) for b in read_tape(path).blocks]


def test_tap_blocks_agree_with_tzxlist(catch_build: dict[str, Any]) -> None:
    tape = read_tape(catch_build["run_tap"])
    assert our_blocks(tape.path) == tzxlist_blocks(tape.path)
    header = tape.blocks[2].data
    assert header[0] == 0 and header[1] == 3  # a CODE header...
    assert struct.unpack_from("<HH", header, 12) == (len(catch_build["binary"]), 0x8000)


def test_plain_tapbas_tape_loads_the_program_and_returns_to_basic(
    catch_build: dict[str, Any],
) -> None:
    """pasmo's loader without `end` only loads the code: BASIC then waits for a key."""
    loaded = load_tape(catch_build["tap"])
    assert loaded.trapped == (0, 1, 2, 3) and loaded.played == ()
    assert not loaded.started and loaded.snapshot.registers.pc == 0x10A8
    assert program_bytes(loaded.snapshot, catch_build) == catch_build["binary"]


def test_tape_stops_at_the_program_entry(catch_build: dict[str, Any]) -> None:
    loaded = load_tape(catch_build["run_tap"])
    assert loaded.started and loaded.trapped == (0, 1, 2, 3)
    assert loaded.snapshot.registers.pc == catch_build["symbols"]["start"]
    assert program_bytes(loaded.snapshot, catch_build) == catch_build["binary"]
    bundled = load_snapshot(CATCH / "catch.sna")
    # The bundled .sna keeps its PC pushed below the stack; the rest of the image is equal.
    ours = bytearray(program_bytes(loaded.snapshot, catch_build))
    theirs = program_bytes(bundled, catch_build)
    below_stack = bundled.registers.sp - catch_build["symbols"]["image_start"]
    ours[below_stack - 2 : below_stack] = theirs[below_stack - 2 : below_stack]
    assert ours == theirs


def write_tape_game(folder: Path, tape: Path, **overrides: Any) -> Path:
    spec = yaml.safe_load((CATCH / "catch.yaml").read_text())
    spec.update(snapshot=tape.name, **overrides)
    if tape.parent != folder:
        shutil.copy(tape, folder / tape.name)
    path = folder / "catch_tape.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def assert_plays_like_bundled(yaml_path: Path, seeds: int = 2, steps: int = 25) -> None:
    tape_session, bundled_session = (
        GameSession(load_game(yaml_path)),
        GameSession(load_game("catch")),
    )
    for seed in range(seeds):
        tape_session.reset(seed=seed)
        bundled_session.reset(seed=seed)
        assert tape_session.values == bundled_session.values
        assert np.array_equal(tape_session.machine.screen(), bundled_session.machine.screen())
        for n in range(steps):
            action = (n // 3) % 3
            ours, theirs = tape_session.step(action), bundled_session.step(action)
            assert ours == theirs, f"seed {seed}, step {n}"
            assert np.array_equal(tape_session.machine.screen(), bundled_session.machine.screen())


def test_tape_game_plays_like_the_snapshot_game(
    catch_build: dict[str, Any], tmp_path: Path
) -> None:
    yaml_path = write_tape_game(tmp_path, catch_build["run_tap"])
    game = load_game(yaml_path)
    assert game.from_tape and game.snapshot.registers.pc == catch_build["symbols"]["start"]
    assert_plays_like_bundled(yaml_path)


def test_tape_game_needs_a_48k_machine(catch_build: dict[str, Any], tmp_path: Path) -> None:
    yaml_path = write_tape_game(tmp_path, catch_build["run_tap"], machine="128k")
    with pytest.raises(GameDefinitionError, match=r"snapshot: catch_run.tap is a tape.*48K"):
        load_game(yaml_path)


# -- snap2tzx: a BASIC loader and turbo blocks read by its own loader ------------------------


@pytest.fixture(scope="module")
def snap2tzx_tape(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need("snap2tzx")
    out = tmp_path_factory.mktemp("snap2tzx") / "catch_turbo.tzx"
    run_tool("snap2tzx", "-o", out, CATCH / "catch.sna")
    return out


def test_snap2tzx_tape_agrees_with_tzxlist(snap2tzx_tape: Path) -> None:
    blocks = our_blocks(snap2tzx_tape)
    assert blocks == tzxlist_blocks(snap2tzx_tape)
    assert [kind for kind, _ in blocks] == [0x10, 0x10, 0x11, 0x11]


def test_snap2tzx_turbo_blocks_load_in_real_time(snap2tzx_tape: Path, tmp_path: Path) -> None:
    loaded = load_tape(snap2tzx_tape)
    assert loaded.trapped == (0, 1) and loaded.played == (2, 3) and loaded.started
    # Its loader hands over to the game (0x8100) with the snapshot's registers.
    machine = ZXSpectrum()
    machine.load_snapshot(loaded.snapshot)
    assert machine.run_until(0x8100, 100) is None  # it did so already, while settling
    assert_plays_like_bundled(write_tape_game(tmp_path, snap2tzx_tape), seeds=1, steps=15)


def test_turbo_block_without_real_time_loading_is_a_clear_error(snap2tzx_tape: Path) -> None:
    with pytest.raises(TapeError, match=r"turbo block 2 needs real-time loading") as info:
        load_tape(snap2tzx_tape, realtime=False)
    assert str(snap2tzx_tape) in str(info.value)


# -- a TZX of our own: information blocks, a standard header and a turbo data block -------


def tzx_block(block_id: int, body: bytes) -> bytes:
    return bytes([block_id]) + body


def make_mixed_tzx(tap: Path, out: Path) -> Path:
    """The tape's blocks as TZX, the code block (last) as turbo speed data, among
    informational blocks, so that LD-BYTES reads a 0x11 block."""
    blocks = [b.data for b in read_tape(tap).blocks]
    text = b"OakEmu-RL tape test"
    archive = bytes([0x00, 5]) + b"Catch"  # one string: the title
    group = b"loader"
    parts = [
        b"ZXTape!\x1a\x01\x14",
        tzx_block(0x30, bytes([len(text)]) + text),
        tzx_block(0x32, struct.pack("<HB", len(archive) + 1, 1) + archive),
        tzx_block(0x21, bytes([len(group)]) + group),
        *(tzx_block(0x10, struct.pack("<HH", 1000, len(d)) + d) for d in blocks[:2]),
        tzx_block(0x22, b""),
        tzx_block(0x20, struct.pack("<H", 500)),
        tzx_block(0x10, struct.pack("<HH", 1000, len(blocks[2])) + blocks[2]),
        tzx_block(
            0x11,
            struct.pack("<6HBH", 1700, 450, 450, 200, 400, 2058, 8, 100)
            + len(blocks[3]).to_bytes(3, "little") + blocks[3],
        ),
    ]  # fmt: skip
    out.write_bytes(b"".join(parts))
    return out


def test_own_tzx_with_a_turbo_block_read_by_the_rom(
    catch_build: dict[str, Any], tmp_path: Path
) -> None:
    path = make_mixed_tzx(catch_build["run_tap"], tmp_path / "mixed.tzx")
    tape = read_tape(path)
    assert our_blocks(path) == tzxlist_blocks(path)
    assert [b.block_id for b in tape.blocks] == [
        0x30,
        0x32,
        0x21,
        0x10,
        0x10,
        0x22,
        0x20,
        0x10,
        0x11,
    ]
    assert tape.blocks[0].text == "OakEmu-RL tape test" and tape.blocks[2].text == "loader"
    turbo = tape.blocks[8]
    assert (turbo.pilot_pulse, turbo.pilot_pulses, turbo.sync, turbo.bit_pulses) == (
        1700, 2058, (450, 450), (200, 400),
    )  # fmt: skip
    loaded = load_tape(tape)
    assert loaded.trapped == (3, 4, 7, 8) and loaded.played == () and loaded.started
    assert program_bytes(loaded.snapshot, catch_build) == catch_build["binary"]


def test_signal_of_a_standard_block_has_its_pulses(catch_build: dict[str, Any]) -> None:
    header = read_tape(catch_build["run_tap"]).blocks[0]
    signal = TapeSignal([header], "<test>")
    bits = 8 * len(header.data)
    # A rising edge, then an edge after each of 8063 pilot pulses, 2 sync pulses and two
    # pulses per bit: an even count, so the level is low when the pause begins.
    assert len(signal.edges) == 1 + 8063 + 2 + 2 * bits
    ones = sum(bin(b).count("1") for b in header.data)
    data_ticks = 2 * (855 * (bits - ones) + 1710 * ones)
    assert signal.spans[0].end == 8063 * 2168 + 667 + 735 + data_ticks
    assert signal.end == signal.spans[0].end + 1000 * 3500


def test_signal_blocks_loops_and_stops(tmp_path: Path) -> None:
    """Pure tone in a loop, a pulse list, 'stop the tape', then standard and pure data."""
    block = with_checksum(b"\xff" + bytes(10))
    path = tmp_path / "signal.tzx"
    path.write_bytes(
        b"ZXTape!\x1a\x01\x14"
        + tzx_block(0x24, struct.pack("<H", 2))
        + tzx_block(0x12, struct.pack("<HH", 1000, 3))
        + tzx_block(0x25, b"")
        + tzx_block(0x13, bytes([2]) + struct.pack("<HH", 500, 600))
        + tzx_block(0x20, struct.pack("<H", 0))
        + tzx_block(0x10, struct.pack("<HH", 1000, len(block)) + block)
        + tzx_block(0x14, struct.pack("<HHBH", 300, 600, 4, 0) + (2).to_bytes(3, "little"))
        + b"\xa5\xf0"
    )
    assert our_blocks(path) == tzxlist_blocks(path)
    tape = read_tape(path)
    assert tape.blocks[4].stops_tape and tape.blocks[6].used_bits == 4
    signal = TapeSignal(tape.blocks, path)
    # The rising edge, 2 x 3 tone pulses, 2 listed pulses; then the tape stops.
    assert list(signal.edges) == [0, 1000, 2000, 3000, 4000, 5000, 6000, 6500, 7100]
    assert signal.next_index == 4 and signal.spans == [] and signal.end == 7100
    rest = TapeSignal(tape.blocks[5:], path)
    pure = rest.spans[1]
    assert pure.data_start == pure.start == rest.spans[0].end + 1000 * 3500
    # 0xA5 then the top 4 bits of 0xF0: 1010 0101 1111, two pulses each.
    bits = [1, 0, 1, 0, 0, 1, 0, 1, 1, 1, 1, 1]
    assert pure.end - pure.start == sum(2 * (600 if b else 300) for b in bits)


def test_the_rom_reads_our_signal_in_real_time() -> None:
    """No trap: the ROM's own LD-BYTES loads a standard block from the EAR bit."""
    payload = bytes(range(7, 47))
    block = standard_block(0, with_checksum(b"\xff" + payload))
    memory = bytearray(0xC000)
    # LD IX,0x9000; LD DE,40; LD A,0xFF; SCF; CALL 0x0556; JR $
    program = bytes.fromhex("dd2100901128003eff37cd560518fe")
    memory[0x4000 : 0x4000 + len(program)] = program
    registers = Registers(sp=0xF000, pc=0x8000, iy=0x5C3A, im=1)
    machine = ZXSpectrum()
    machine.load_snapshot(Snapshot.from_48k_memory(bytes(memory), registers))
    signal = TapeSignal([block], "<test>")
    machine.set_ear_input(TapePlayer(signal, 0).level)
    frames = machine.run_until(0x800D, signal.end // 69888 + 50)
    assert frames is not None and frames >= signal.spans[0].end // 69888
    assert machine.register("af") & 1, "LD-BYTES returned with carry clear (a loading error)"
    assert machine.read(0x9000, len(payload)) == payload
    assert (machine.register("ix"), machine.register("de")) == (0x9000 + len(payload), 0)


# -- errors -----------------------------------------------------------------------------------


def test_unreadable_tapes_name_the_file(tmp_path: Path) -> None:
    cases = {
        "bad.tzx": (b"NotATape" + bytes(10), r"not a TZX file"),
        "short.tzx": (b"ZXTape!\x1a\x01\x14" + b"\x10\xe8\x03\x13\x00\x00", r"truncated"),
        "short.tap": (b"\x13\x00\x00\x03", r"claims 19 bytes but only 2 remain"),
        "empty.tap": (b"", r"holds no data blocks"),
        "tape.wav": (b"RIFF", r"unknown tape format '.wav'"),
    }
    for name, (data, problem) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(TapeError, match=problem) as info:
            read_tape(path)
        assert str(path) in str(info.value)
    with pytest.raises(TapeError, match="file not found"):
        read_tape(tmp_path / "missing.tap")


def tap_of(*blocks: bytes) -> bytes:
    return b"".join(struct.pack("<H", len(b)) + b for b in blocks)


def with_checksum(body: bytes) -> bytes:
    parity = 0
    for byte in body:
        parity ^= byte
    return body + bytes([parity])


def program_header(length: int) -> bytes:
    """The header of a BASIC program (what LOAD "" looks for) of `length` bytes."""
    return with_checksum(
        bytes([0, 0]) + b"program   " + struct.pack("<HHH", length, 0x8000, length)
    )


def test_a_block_of_the_wrong_length_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "short_block.tap"
    path.write_bytes(tap_of(program_header(100), with_checksum(b"\xff" + bytes(60))))
    with pytest.raises(TapeError, match=r"block 1 \(standard speed data, 62 bytes\) holds 60 "
                       r"bytes after its flag byte 0xFF, but the program asks for 100"):  # fmt: skip
        load_tape(path)


def test_a_bad_checksum_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad_sum.tap"
    data = bytearray(with_checksum(b"\xff" + bytes(range(100))))
    data[-1] ^= 0x55
    path.write_bytes(tap_of(program_header(100), bytes(data)))
    with pytest.raises(TapeError, match=r"block 1 .* fails its checksum"):
        load_tape(path)


# -- the cache --------------------------------------------------------------------------------


def snapshot_key(snapshot: Snapshot) -> tuple[Any, ...]:
    return snapshot.registers, snapshot.memory_48k(), snapshot.border, snapshot.tstates


def test_cache_is_used_and_follows_the_tape(
    catch_build: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "game.tap"
    shutil.copy(catch_build["run_tap"], tape)
    cache = tmp_path / ".oakemu-cache"
    began = time.perf_counter()
    fresh = tape_snapshot(tape, cache)
    fresh_s = time.perf_counter() - began
    cached_file = cache_file(read_tape(tape), cache)
    assert cached_file.is_file() and cached_file.name.startswith("game-")

    real_load = tape_cache.load_tape
    loads: list[Path] = []

    def counting_load(t: Any, **kwargs: Any) -> Any:
        loads.append(t.path)
        return real_load(t, **kwargs)

    monkeypatch.setattr(tape_cache, "load_tape", counting_load)
    began = time.perf_counter()
    again = tape_snapshot(tape, cache)
    cached_s = time.perf_counter() - began
    assert loads == [] and snapshot_key(again) == snapshot_key(fresh)
    assert cached_s < fresh_s

    # A changed tape (one byte of code, checksum fixed) is loaded again, into a new entry.
    blocks = [b.data for b in read_tape(tape).blocks]
    code = bytearray(blocks[3][:-1])
    code[1 + 0x20] ^= 0xFF  # 0x8020, in the gap after the variables
    tape.write_bytes(tap_of(*blocks[:3], with_checksum(bytes(code))))
    changed = tape_snapshot(tape, cache)
    assert loads == [tape]
    assert changed.memory_48k()[0x4020] == fresh.memory_48k()[0x4020] ^ 0xFF
    assert len(list(cache.glob("game-*.szx"))) == 2

    # A damaged entry is loaded again too.
    cache_file(read_tape(tape), cache).write_bytes(b"ZXST damaged")
    assert snapshot_key(tape_snapshot(tape, cache)) == snapshot_key(changed)
    assert loads == [tape, tape]


def test_unwritable_cache_falls_back_to_loading(
    catch_build: dict[str, Any], tmp_path: Path
) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the cache folder would go")
    snapshot = tape_snapshot(catch_build["run_tap"], blocker / ".oakemu-cache")
    assert snapshot.registers.pc == catch_build["symbols"]["start"]
    assert blocker.read_text().startswith("a file")


def test_tape_game_caches_next_to_its_yaml(catch_build: dict[str, Any], tmp_path: Path) -> None:
    yaml_path = write_tape_game(tmp_path, catch_build["run_tap"])
    first = load_game(yaml_path).snapshot
    entries = list((tmp_path / ".oakemu-cache").glob("catch_run-*.szx"))
    assert len(entries) == 1
    assert snapshot_key(load_game(yaml_path).snapshot) == snapshot_key(first)


# -- oakemu-rl snapshot -----------------------------------------------------------------------


def test_snapshot_command_writes_a_z80_that_fuse_reads(
    catch_build: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapdump, snapconv = need("snapdump"), need("snapconv")
    out = tmp_path / "catch.z80"
    assert main(["snapshot", str(catch_build["run_tap"]), "--out", str(out)]) == 0
    assert "4 block(s) through the ROM trap" in capsys.readouterr().out
    written = load_snapshot(out)
    assert snapshot_key(written) == snapshot_key(load_tape(catch_build["run_tap"]).snapshot)
    dump = run_tool(snapdump, out)
    assert re.search(r"PC:\s+0x8100", dump) and "Spectrum 48K" in dump
    converted = tmp_path / "converted.szx"
    run_tool(snapconv, out, converted)
    assert load_snapshot(converted).memory_48k() == written.memory_48k()

    pressed = tmp_path / "pressed.szx"
    args = ["snapshot", str(catch_build["run_tap"]), "--out", str(pressed)]
    assert main([*args, "--press", "SPACE", "--frames", "10"]) == 0
    playing = load_snapshot(pressed)
    assert playing.registers.pc != 0x8100 and playing.memory_48k() != written.memory_48k()

    assert main([*args, "--press", "SPACE"]) == 2
    assert main([*args[:-1], str(tmp_path / "x.tape")]) == 2
    assert "give --frames N" in capsys.readouterr().err
