"""The emulator layer: keyboard and Kempston ports, state, determinism, breakpoints, screen."""

from __future__ import annotations

import numpy as np
import pytest

from oakemu_rl.emulator import EmulatorError, ZXSpectrum, canonical_key
from oakemu_rl.emulator.keyboard import HALF_ROWS, KEMPSTON_BITS, KEYBOARD_KEYS, UnknownKeyError
from oakemu_rl.emulator.screen import decode_screen
from z80_programs import RESULTS, counter_with_routine, port_reader, snapshot_48k


@pytest.fixture
def reader() -> ZXSpectrum:
    machine = ZXSpectrum()
    machine.load_snapshot(snapshot_48k(port_reader()))
    return machine


def test_all_forty_keys_are_named_once() -> None:
    assert len(KEYBOARD_KEYS) == 40
    assert sorted(len(row) for row in HALF_ROWS) == [5] * 8


@pytest.mark.parametrize("key", sorted(KEYBOARD_KEYS))
def test_each_key_reads_low_on_its_half_row_only(reader: ZXSpectrum, key: str) -> None:
    reader.set_keys([key])
    reader.run_frames(1)
    rows = reader.read(RESULTS, 8)
    row, bit = KEYBOARD_KEYS[key]
    for n, value in enumerate(rows):
        expected = 0xBF & ~(1 << bit) if n == row else 0xBF
        assert value == expected, f"{key}: half-row {n} read {value:#04x}"


def test_keys_combine_and_release(reader: ZXSpectrum) -> None:
    reader.set_keys(["Q", "W", "SPACE", "SYMBOL_SHIFT"])
    reader.run_frames(1)
    assert reader.read(RESULTS + 2, 1)[0] == 0xBF & ~0b11  # Q and W
    assert reader.read(RESULTS + 7, 1)[0] == 0xBF & ~0b11  # SPACE and SYMBOL SHIFT
    reader.set_keys([])
    reader.run_frames(1)
    assert reader.read(RESULTS, 8) == bytes([0xBF] * 8)


def test_port_with_several_rows_selected_ors_them() -> None:
    # LD BC,0x00FE; IN A,(C) selects every half-row at once.
    program = bytes([0xF3, 0x01, 0xFE, 0x00, 0xED, 0x78, 0x32, 0x00, 0x90, 0x18, 0xF5])
    machine = ZXSpectrum()
    machine.load_snapshot(snapshot_48k(program))
    machine.set_keys(["CAPS_SHIFT", "H"])  # bit 0 of row 0, bit 4 of row 6
    machine.run_frames(1)
    assert machine.read(RESULTS, 1)[0] == 0xBF & ~0b10001


@pytest.mark.parametrize("key,bit", sorted(KEMPSTON_BITS.items()))
def test_kempston_bits_are_active_high(reader: ZXSpectrum, key: str, bit: int) -> None:
    reader.set_keys([key])
    reader.run_frames(1)
    assert reader.read(RESULTS + 8, 1)[0] == bit
    assert reader.read(RESULTS, 8) == bytes([0xBF] * 8)  # the keyboard is untouched


def test_kempston_and_keyboard_together(reader: ZXSpectrum) -> None:
    reader.set_keys(["KEMPSTON_FIRE", "KEMPSTON_LEFT", "P"])
    reader.run_frames(1)
    assert reader.read(RESULTS + 8, 1)[0] == 0x12
    assert reader.read(RESULTS + 5, 1)[0] == 0xBE


def test_key_names_accept_aliases_and_reject_unknown_names() -> None:
    assert canonical_key("cs") == "CAPS_SHIFT"
    assert canonical_key("symbol shift") == "SYMBOL_SHIFT"
    assert canonical_key(7) == "7"
    with pytest.raises(UnknownKeyError, match="unknown key name 'shiftlock'"):
        canonical_key("shiftlock")


def _counter_machine() -> ZXSpectrum:
    machine = ZXSpectrum()
    machine.load_snapshot(snapshot_48k(counter_with_routine()))
    machine.write(RESULTS + 2, b"\x01\xac")
    return machine


def test_frames_are_50hz_interrupts() -> None:
    machine = _counter_machine()
    machine.run_frames(10)
    # One HALT-synchronised increment per frame (the first frame may land mid-HALT).
    assert machine.read(RESULTS, 1)[0] in (9, 10)
    assert machine.frame_count == 10


def test_breakpoints_are_events_of_their_frame_and_do_not_stop() -> None:
    machine = _counter_machine()
    machine.set_breakpoints({"tick": 0x8100, "rare": 0x8110})
    per_frame = [machine.run_frames(1) for _ in range(12)]
    assert all(events.count("tick") == 1 for events in per_frame[1:])
    rare_frames = [n for n, events in enumerate(per_frame) if "rare" in events]
    assert len(rare_frames) == 3 and np.diff(rare_frames).tolist() == [4, 4]
    # Emulation went on through every breakpoint: the counter kept counting.
    assert machine.read(RESULTS, 1)[0] >= 11


def test_breakpoint_reached_by_falling_through_is_reported() -> None:
    program = bytes([0xF3, 0x00, 0x00, 0x18, 0xFC])  # DI; NOP; NOP; JR -4
    machine = ZXSpectrum()
    machine.load_snapshot(snapshot_48k(program))
    machine.set_breakpoints({"second_nop": 0x8002})
    assert "second_nop" in machine.run_frames(1)


def test_run_until_reports_frames_or_none() -> None:
    machine = _counter_machine()
    assert machine.run_until(0x8110, timeout_frames=10) is not None
    machine = ZXSpectrum()
    machine.load_snapshot(snapshot_48k(bytes([0xF3, 0x18, 0xFE])))  # DI; JR $
    assert machine.run_until(0x8100, timeout_frames=3) is None


def test_restore_and_replay_is_bit_identical() -> None:
    machine = _counter_machine()
    machine.set_breakpoints({"rare": 0x8110})
    machine.run_frames(7)
    state = machine.save_state()
    inputs = [["Q"], [], ["KEMPSTON_FIRE"], ["1", "2"], []] * 3

    def play(m: ZXSpectrum) -> tuple[bytes, np.ndarray, list[list[str]]]:
        events = []
        for keys in inputs:
            m.set_keys(keys)
            events.append(m.run_frames(3))
        return m.read(0x4000, 0xC000), m.screen(), events

    first = play(machine)
    machine.load_state(state)
    again = play(machine)
    other = ZXSpectrum()
    other.set_breakpoints({"rare": 0x8110})  # breakpoints belong to the machine, not its state
    other.load_state(state)
    fresh = play(other)
    for result in (again, fresh):
        assert result[0] == first[0]
        assert np.array_equal(result[1], first[1])
        assert result[2] == first[2]


def test_load_state_rejects_garbage_and_other_models() -> None:
    machine = ZXSpectrum()
    with pytest.raises(EmulatorError, match="not a machine state"):
        machine.load_state(b"nonsense")
    state128 = ZXSpectrum("128k").save_state()
    with pytest.raises(EmulatorError):
        machine.load_state(state128)


def test_memory_read_write_and_bounds() -> None:
    machine = ZXSpectrum()
    machine.write(0xFFFE, b"\x12\x34")
    assert machine.read(0xFFFE, 2) == b"\x12\x34"
    rom_before = machine.read(0x0000, 4)
    machine.write(0x0000, b"\x00\x00\x00\x00")
    assert machine.read(0x0000, 4) == rom_before  # ROM is read-only
    with pytest.raises(ValueError, match="64 KiB"):
        machine.read(0xFFFF, 2)
    with pytest.raises(ValueError, match="64 KiB"):
        machine.write(-1, b"\x00")


def _display(bitmap_byte: int, attribute: int) -> np.ndarray:
    display = np.zeros(6912, dtype=np.uint8)
    display[0] = bitmap_byte  # pixel row 0, cells 0
    display[6144] = attribute
    return display


def test_screen_decodes_ink_paper_bright_and_flash() -> None:
    # Ink 2 (red), paper 5 (cyan), BRIGHT, FLASH; the first byte 0b10100000.
    display = _display(0b1010_0000, 0x80 | 0x40 | (5 << 3) | 2)
    normal = decode_screen(display, flash_phase=False)
    assert normal.shape == (192, 256) and normal.dtype == np.uint8
    assert normal[0, :4].tolist() == [10, 13, 10, 13]
    assert normal[1, 0] == 13  # row 1 of the cell is paper
    flashed = decode_screen(display, flash_phase=True)
    assert flashed[0, :4].tolist() == [13, 10, 13, 10]
    assert normal[8, 0] == 0  # the next cell row has attribute 0: black


def test_screen_row_addressing_follows_the_display_file_layout() -> None:
    machine = ZXSpectrum()
    machine.write(0x4000, bytes(6144))
    machine.write(0x5800, bytes([0x38] * 768))  # paper 7, ink 0 everywhere
    # Pixel row y lives at 0x4000 | (y&0xC0)<<5 | (y&7)<<8 | (y&0x38)<<2.
    for y in (0, 1, 7, 8, 63, 64, 100, 191):
        address = 0x4000 | ((y & 0xC0) << 5) | ((y & 7) << 8) | ((y & 0x38) << 2)
        machine.write(address, b"\xff")
    screen = machine.screen()
    lit_rows = sorted(set(np.nonzero(screen[:, :8] == 0)[0].tolist()))
    assert lit_rows == [0, 1, 7, 8, 63, 64, 100, 191]


def test_128k_pages_memory_and_restores_paging() -> None:
    """zx's 128K model really pages: writes through 0x7FFD land in different RAM pages."""
    # DI; for page in (1, 3): LD BC,0x7FFD; LD A,page; OUT (C),A; LD A,0x40+page; LD (0xC000),A
    program = [0xF3]
    for page in (1, 3):
        program += [0x01, 0xFD, 0x7F, 0x3E, page, 0xED, 0x79, 0x3E, 0x40 + page, 0x32, 0, 0xC0]
    program += [0x18, 0xFE]  # JR $
    machine = ZXSpectrum("128k")
    snap = machine.to_snapshot()
    pages = dict(snap.ram_pages)
    block = bytearray(pages[2])
    block[: len(program)] = bytes(program)  # 0x8000 is always page 2
    pages[2] = bytes(block)
    snap.ram_pages = pages
    snap.registers.pc, snap.registers.sp = 0x8000, 0x7F00
    machine.load_snapshot(snap)
    machine.run_frames(1)
    assert machine.port_7ffd == 3
    assert machine.read(0xC000, 1) == b"\x43"
    after = machine.to_snapshot()
    assert after.ram_pages[1][0] == 0x41 and after.ram_pages[3][0] == 0x43

    state = machine.save_state()
    other = ZXSpectrum("128k")
    other.run_frames(2)  # the 128K ROM changes the paging while it starts
    other.load_state(state)
    assert other.port_7ffd == 3 and other.read(0xC000, 1) == b"\x43"
    assert other.read(0x4000, 0xC000) == machine.read(0x4000, 0xC000)


@pytest.mark.parametrize("frames", [1, 2, 3, 5])
def test_state_saved_during_halt_resumes_halted(frames: int) -> None:
    """The core keeps HALT outside its state bytes; save/load must carry it both ways."""
    machine = _counter_machine()
    machine.set_breakpoints({"tick": 0x8100, "rare": 0x8110})
    machine.run_frames(frames)  # frames end while the CPU waits in HALT
    state = machine.save_state()
    expected = [machine.run_frames(1) for _ in range(6)], machine.read(0x4000, 0xC000)

    running = _counter_machine()  # a core that is not halted
    running.set_breakpoints({"tick": 0x8100, "rare": 0x8110})
    running.run_until(0x8110, timeout_frames=10)
    running.load_state(state)
    assert ([running.run_frames(1) for _ in range(6)], running.read(0x4000, 0xC000)) == expected

    halted = _counter_machine()  # a halted core loading a state that is not halted
    halted.set_breakpoints({"tick": 0x8100, "rare": 0x8110})
    fresh_state = halted.save_state()
    reference = [halted.run_frames(1) for _ in range(6)], halted.read(0x4000, 0xC000)
    halted.load_state(fresh_state)
    assert ([halted.run_frames(1) for _ in range(6)], halted.read(0x4000, 0xC000)) == reference
