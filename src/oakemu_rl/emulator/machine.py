"""A headless ZX Spectrum 48K/128K on the `zx` package's C++ core.

We drive `zx._spectrumbase._SpectrumBase` directly: the Python `zx.Spectrum`
renders pixels and dispatches every port read through a device list, which
costs more than the emulation itself. Here a port read is two table look-ups
(`InputState.read_port`) and the screen is decoded from display memory only
when asked for.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt
from zx._data import Spectrum48, Spectrum128
from zx._rom import load_rom_image
from zx._spectrum import SpectrumState
from zx._spectrumbase import _SpectrumBase

from .errors import EmulatorError, SnapshotError, UnsupportedMachineError
from .keyboard import InputState
from .screen import decode_attributes, decode_screen, render_screen
from .snapshots import PAGE_SIZE, MachineModel, Registers, Snapshot, load_snapshot

_END_OF_FRAME = 1 << 1
_FETCHES_LIMIT_HIT = 1 << 3
_BREAKPOINT_HIT = 1 << 4
_BREAKPOINT_MARK = 1

# Layout of the core's memory image: 10 pages of 16 KiB.
_MEMORY_OFFSET = 52
_ROM_PAGE_SLOTS = {0: 0, 1: 4}
_RAM_PAGE_SLOTS = {5: 1, 2: 2, 0: 3, 1: 5, 3: 6, 4: 7, 6: 8, 7: 9}
_TICKS_PER_FRAME = {"48k": 69888, "128k": 70908}

_STATE_MAGIC = b"OAKS"
_STATE_HEADER = struct.Struct("<4sBBBBQ")  # magic, version, model, 7FFD, halted, frames
_STATE_VERSION = 2
_MODEL_CODES: dict[str, int] = {"48k": 0, "128k": 1}
# Registers and flip-flops that `register` and `set_registers` accept.
_REGISTERS = (
    "af", "bc", "de", "hl", "ix", "iy", "sp", "pc", "alt_af", "alt_bc", "alt_de", "alt_hl",
    "iff1", "iff2",
)  # fmt: skip
_EAR_BIT = 0x40


class ZXSpectrum:
    """One emulated Spectrum: run frames, hold keys, read memory, save and restore state.

    Routine addresses registered with `set_breakpoints` are reported as events of the
    frame in which the program counter reached them; emulation does not stop.
    """

    def __init__(self, model: MachineModel = "48k") -> None:
        if model not in _MODEL_CODES:
            raise UnsupportedMachineError(
                f"unknown machine model {model!r}; expected '48k' or '128k'"
            )
        self.model: MachineModel = model
        self.input = InputState()
        self.frame_count = 0
        self._port_7ffd = 0
        self._breakpoints: dict[int, str] = {}
        self._ear: Callable[[int], int] | None = None
        self._port_hook: Callable[[int, int], None] | None = None
        self._core = self._make_core()
        self._view = self._core._get_state_view()
        self._state = SpectrumState(self._view)
        self._image: npt.NDArray[np.uint8] = np.frombuffer(
            self._view, dtype=np.uint8, offset=_MEMORY_OFFSET, count=10 * PAGE_SIZE
        )
        self._state.model = Spectrum48 if model == "48k" else Spectrum128
        rom = load_rom_image(self._state.model._ROM_FILE_NAME)
        for page in range(len(rom) // PAGE_SIZE):
            slot = _ROM_PAGE_SLOTS[page] * PAGE_SIZE
            self._image[slot : slot + PAGE_SIZE] = np.frombuffer(
                rom[page * PAGE_SIZE : (page + 1) * PAGE_SIZE], dtype=np.uint8
            )
        if model == "128k":
            self._apply_paging(0)

    # -- core -----------------------------------------------------------------

    def _make_core(self) -> _SpectrumBase:
        core = _SpectrumBase()
        core.set_on_input_callback(self._port_reader())
        if self.model == "128k":
            # The stub types the callback with one argument; the core passes (address, value).
            core.set_on_output_callback(self._on_output)  # type: ignore[arg-type]
        for address in self._breakpoints:
            core.mark_addrs(address, 1, _BREAKPOINT_MARK)
        return core

    def _on_output(self, address: int, value: int) -> None:
        if address & 0x8002 == 0 and not self._port_7ffd & 0x20:
            self._port_7ffd = value

    def _apply_paging(self, value: int) -> None:
        """Set the core's 0x7FFD latch, which lives outside its state bytes.

        The core only changes paging on an OUT, so we execute `OUT (C),A` from a
        scratch location and then put the saved state back. A locked latch
        (bit 5) can only be cleared by a fresh core.
        """
        saved = bytes(self._view)
        if self._port_7ffd & 0x20:
            old_view = self._view
            self._core = self._make_core()
            self._view = self._core._get_state_view()
            self._view[:] = old_view
            self._state = SpectrumState(self._view)
            self._image = np.frombuffer(
                self._view, dtype=np.uint8, offset=_MEMORY_OFFSET, count=10 * PAGE_SIZE
            )
            self._port_7ffd = 0
        scratch = _RAM_PAGE_SLOTS[2] * PAGE_SIZE
        self._image[scratch : scratch + 2] = (0xED, 0x79)  # OUT (C),A at 0x8000
        state = self._state
        state.pc, state.bc, state.af = 0x8000, 0x7FFD, (value << 8) | 0xFF
        state.iff1 = 0
        state.suppress_interrupts = True
        state.ticks_since_int = 1000
        state.fetches_limit = 1
        state.set_events(0)
        events = self._core._run()
        if not events & _FETCHES_LIMIT_HIT:
            raise EmulatorError(f"could not set the 128K paging latch (events {events:#x})")
        self._view[:] = saved
        self._port_7ffd = value

    # -- the CPU's HALT flag ------------------------------------------------------
    #
    # The core keeps "halted" outside its state bytes, so a state saved during a
    # HALT would otherwise resume running, and one loaded into a halted core would
    # never wake. We probe and set the flag by executing one instruction from a
    # scratch copy of the state, then put the real state back.

    def _execute_one(self, opcode: int) -> int:
        """Run one instruction `opcode` placed at PC (or at 0x8000 when PC is in ROM).

        Returns the address it was placed at.
        """
        state = self._state
        pc = state.pc if state.pc >= 0x4000 else 0x8000
        state.pc = pc
        self._image[self._slot_offset(pc)] = opcode
        state.suppress_interrupts = True
        state.ticks_since_int = 1000
        state.fetches_limit = 1
        state.set_events(0)
        self._core._run()
        return pc

    def _is_halted(self) -> bool:
        saved = bytes(self._view)
        probe = self._execute_one(0x00)  # NOP: moves PC on unless the CPU is halted
        halted = self._state.pc == probe
        self._view[:] = saved
        return halted

    def _set_halted(self, halted: bool) -> None:
        saved = bytes(self._view)
        state = self._state
        if halted:
            self._execute_one(0x76)  # HALT
        else:
            # Accepting an interrupt is the only way out of HALT the core offers.
            state.iff1, state.int_mode, state.sp = 1, 1, 0xFFFE
            state.suppress_interrupts = False
            self._core.on_handle_active_int()
        self._view[:] = saved

    # -- snapshots and state ----------------------------------------------------

    def load_snapshot(self, snapshot: Snapshot | str | Path) -> None:
        """Install a snapshot (an object or a .z80/.sna/.szx path)."""
        path = None
        if not isinstance(snapshot, Snapshot):
            path = Path(snapshot)
            snapshot = load_snapshot(path)
        if snapshot.model != self.model:
            raise SnapshotError(
                path or "<snapshot>",
                f"is a {snapshot.model} snapshot, but the machine is a {self.model}",
            )
        self._set_halted(False)
        for page, block in snapshot.ram_pages.items():
            slot = _RAM_PAGE_SLOTS[page] * PAGE_SIZE
            self._image[slot : slot + PAGE_SIZE] = np.frombuffer(block, dtype=np.uint8)
        if self.model == "128k":
            self._apply_paging(snapshot.port_7ffd)
        regs, state = snapshot.registers, self._state
        state.af, state.bc, state.de, state.hl = regs.af, regs.bc, regs.de, regs.hl
        state.alt_af, state.alt_bc = regs.af_, regs.bc_
        state.alt_de, state.alt_hl = regs.de_, regs.hl_
        state.ix, state.iy, state.sp, state.pc = regs.ix, regs.iy, regs.sp, regs.pc
        state.ir = ((regs.i & 0xFF) << 8) | (regs.r & 0xFF)
        state.iff1, state.iff2, state.int_mode = int(regs.iff1), int(regs.iff2), regs.im
        state.iregp_kind = "hl"
        state.border_colour = snapshot.border & 7
        state.suppress_interrupts = False
        state.allow_int_after_ei = False
        state.fetches_limit = 0
        state.set_events(0)
        state.ticks_since_int = snapshot.tstates % _TICKS_PER_FRAME[self.model]
        self.frame_count = 0

    def to_snapshot(self) -> Snapshot:
        """The current machine as a Snapshot, for writing to a file."""
        s = self._state
        regs = Registers(
            af=s.af, bc=s.bc, de=s.de, hl=s.hl, af_=s.alt_af, bc_=s.alt_bc, de_=s.alt_de,
            hl_=s.alt_hl, ix=s.ix, iy=s.iy, sp=s.sp, pc=s.pc, i=s.i, r=s.r,
            iff1=bool(s.iff1), iff2=bool(s.iff2), im=s.int_mode,
        )  # fmt: skip
        pages = (5, 2, 0) if self.model == "48k" else range(8)
        ram = {
            p: self._image[_RAM_PAGE_SLOTS[p] * PAGE_SIZE :][:PAGE_SIZE].tobytes() for p in pages
        }
        return Snapshot(
            self.model, regs, ram, border=s.border_colour, port_7ffd=self._port_7ffd,
            tstates=s.ticks_since_int,
        )  # fmt: skip

    def save_state(self) -> bytes:
        """The complete machine state as bytes (CPU, memory, latches, frame counter)."""
        header = _STATE_HEADER.pack(
            _STATE_MAGIC, _STATE_VERSION, _MODEL_CODES[self.model], self._port_7ffd,
            self._is_halted(), self.frame_count,
        )  # fmt: skip
        return header + bytes(self._view)

    def load_state(self, state: bytes) -> None:
        """Restore a state from `save_state`; the same inputs then give identical frames."""
        size = _STATE_HEADER.size + len(self._view)
        if len(state) != size or state[:4] != _STATE_MAGIC:
            raise EmulatorError(
                f"not a machine state: {len(state)} bytes, expected {size} starting with "
                f"{_STATE_MAGIC!r}"
            )
        _, version, model, port_7ffd, halted, frame_count = _STATE_HEADER.unpack_from(state)
        if version != _STATE_VERSION or model != _MODEL_CODES[self.model]:
            raise EmulatorError(
                f"machine state is version {version} for model code {model}; this machine "
                f"expects version {_STATE_VERSION} and model code {_MODEL_CODES[self.model]}"
            )
        if self.model == "128k":
            self._apply_paging(port_7ffd)
        self._set_halted(bool(halted))
        self._view[:] = state[_STATE_HEADER.size :]
        self.frame_count = frame_count

    # -- running ------------------------------------------------------------------

    def set_breakpoints(self, routines: Mapping[str, int]) -> None:
        """Report reaching these code addresses as named events (adds to earlier ones)."""
        for name, address in routines.items():
            if not 0 <= address <= 0xFFFF:
                raise ValueError(f"routine {name!r}: address {address:#x} is outside 0x0000-0xFFFF")
            self._breakpoints[address] = name
            self._core.mark_addrs(address, 1, _BREAKPOINT_MARK)

    def run_frames(self, frames: int = 1) -> list[str]:
        """Run whole frames; return the names of the routines reached, in order."""
        events: list[str] = []
        run = self._core._run
        names = self._breakpoints
        state = self._state
        done = 0
        while done < frames:
            flags = run()
            if flags & _BREAKPOINT_HIT:
                name = names.get(state.pc)
                if name is not None:
                    events.append(name)
            if flags & _END_OF_FRAME:
                done += 1
                self.frame_count += 1  # as it happens, for the EAR input's clock
        return events

    def run_until_any(self, stops: Iterable[int | range], timeout_frames: int) -> int | None:
        """Run until the program counter reaches one of `stops` (addresses or ranges).

        Returns the address reached, or None after `timeout_frames` whole frames. The
        addresses stay marked on this machine, so later runs through them are slower.
        """
        singles: set[int] = set()
        ranges: list[range] = []
        for stop in stops:
            if isinstance(stop, range):
                if stop.step != 1 or not 0 <= stop.start <= stop.stop <= 0x10000:
                    raise ValueError(f"{stop} is not a run of addresses in 0x0000-0xFFFF")
                if len(stop):
                    self._core.mark_addrs(stop.start, len(stop), _BREAKPOINT_MARK)
                ranges.append(stop)
            else:
                if not 0 <= stop <= 0xFFFF:
                    raise ValueError(f"address {stop:#x} is outside 0x0000-0xFFFF")
                self._core.mark_addrs(stop, 1, _BREAKPOINT_MARK)
                singles.add(stop)
        run = self._core._run
        state = self._state
        frames = 0
        while frames < timeout_frames:
            flags = run()
            if flags & _BREAKPOINT_HIT:
                pc = int(state.pc)
                if pc in singles or any(pc in r for r in ranges):
                    return pc
            if flags & _END_OF_FRAME:
                frames += 1
                self.frame_count += 1
        return None

    def trace_frame(self, watch: Iterable[range]) -> list[int]:
        """Run one whole frame; return each arrival of the program counter at a watched
        address (or a `set_breakpoints` routine), in order, one entry per instruction run there.

        The addresses stay marked on this machine, as with `run_until_any`, so trace on a
        `copy()` and drop it to stop watching.
        """
        for span in watch:
            if span.step != 1 or not 0 <= span.start <= span.stop <= 0x10000:
                raise ValueError(f"{span} is not a run of addresses in 0x0000-0xFFFF")
            if len(span):
                self._core.mark_addrs(span.start, len(span), _BREAKPOINT_MARK)
        run = self._core._run
        state = self._state
        arrivals: list[int] = []
        while True:
            flags = run()
            if flags & _BREAKPOINT_HIT:
                arrivals.append(int(state.pc))
            if flags & _END_OF_FRAME:
                self.frame_count += 1
                return arrivals

    def copy(self) -> ZXSpectrum:
        """A new machine in this one's state (held keys and EAR input too), with no
        breakpoints, marks or port-read hook."""
        twin = ZXSpectrum(self.model)
        twin.load_state(self.save_state())
        twin.set_keys(self.held_keys)
        if self._ear is not None:
            twin.set_ear_input(self._ear)
        return twin

    def run_until(self, address: int, timeout_frames: int) -> int | None:
        """Run until the program counter reaches `address`.

        Returns the number of whole frames that passed, or None when the
        address was not reached within `timeout_frames`.
        """
        self._core.mark_addrs(address, 1, _BREAKPOINT_MARK)
        run = self._core._run
        state = self._state
        frames = 0
        while frames < timeout_frames:
            flags = run()
            if flags & _BREAKPOINT_HIT and state.pc == address:
                return frames
            if flags & _END_OF_FRAME:
                frames += 1
                self.frame_count += 1
        return None

    # -- input --------------------------------------------------------------------

    def set_keys(self, keys: Iterable[str]) -> None:
        """Hold exactly these keys (keyboard names and KEMPSTON_* directions)."""
        self.input.set_held(keys)

    @property
    def held_keys(self) -> frozenset[str]:
        return self.input.held

    def set_ear_input(self, level_at: Callable[[int], int] | None) -> None:
        """Feed the EAR bit (bit 6 of port 0xFE reads) from `level_at(ticks)`; None: EAR low.

        `ticks` is the machine's T-state clock, as the `ticks` property counts it.
        """
        self._ear = level_at
        self._core.set_on_input_callback(self._port_reader())

    def set_port_read_hook(self, hook: Callable[[int, int], None] | None) -> None:
        """Call `hook(port, value)` after every port read the program makes; None: stop.

        `register("pc")` inside the hook is the address just after the reading instruction.
        """
        self._port_hook = hook
        self._core.set_on_input_callback(self._port_reader())

    def _port_reader(self) -> Callable[[int], int]:
        read = self._ear_port_reader()
        hook = self._port_hook
        if hook is None:
            return read

        def read_and_report(address: int) -> int:
            value = read(address)
            hook(address, value)
            return value

        return read_and_report

    def _ear_port_reader(self) -> Callable[[int], int]:
        read = self.input.read_port
        level_at = self._ear
        if level_at is None:
            return read
        per_frame = _TICKS_PER_FRAME[self.model]

        state = self._state

        def read_with_ear(address: int) -> int:
            value = read(address)
            # Inside a run the frame in progress is not counted yet, so no correction is due.
            if not address & 1 and level_at(self.frame_count * per_frame + state.ticks_since_int):
                value |= _EAR_BIT
            return value

        return read_with_ear

    # -- CPU registers --------------------------------------------------------------

    def register(self, name: str) -> int:
        """One register pair (af, bc, ..., pc, alt_af, ...) or flip-flop (iff1, iff2) now."""
        if name not in _REGISTERS:
            raise ValueError(f"unknown register {name!r}; expected one of {', '.join(_REGISTERS)}")
        return int(getattr(self._state, name))

    def set_registers(self, **values: int) -> None:
        """Set register pairs and flip-flops by name, e.g. `set_registers(pc=0x8000, de=0)`."""
        for name, value in values.items():
            if name not in _REGISTERS:
                raise ValueError(
                    f"unknown register {name!r}; expected one of {', '.join(_REGISTERS)}"
                )
            setattr(self._state, name, value & 0xFFFF)

    @property
    def halted(self) -> bool:
        """Whether the CPU is halted (waiting in HALT for an interrupt)."""
        return self._is_halted()

    @property
    def ticks(self) -> int:
        """The T-state clock: `frame_count` whole frames plus the T-states into the next one."""
        per_frame = _TICKS_PER_FRAME[self.model]
        into_frame = int(self._state.ticks_since_int)
        if into_frame >= per_frame:  # a frame that ended is counted; the core wraps on the next run
            into_frame -= per_frame
        return self.frame_count * per_frame + into_frame

    # -- memory and screen --------------------------------------------------------

    def _slot_offset(self, address: int) -> int:
        if self.model == "48k" or 0x4000 <= address < 0xC000:
            return address
        if address < 0x4000:
            return _ROM_PAGE_SLOTS[(self._port_7ffd >> 4) & 1] * PAGE_SIZE + address
        return _RAM_PAGE_SLOTS[self._port_7ffd & 7] * PAGE_SIZE + address - 0xC000

    def read(self, address: int, size: int = 1) -> bytes:
        """Read `size` bytes from the address space as the CPU sees it now."""
        if address < 0 or address + size > 0x10000:
            raise ValueError(
                f"read of {size} bytes at {address:#x} leaves the 64 KiB address space"
            )
        if self.model == "48k":
            return self._image[address : address + size].tobytes()
        return bytes(self._image[self._slot_offset(a)] for a in range(address, address + size))

    def read_byte(self, address: int) -> int:
        return int(self._image[self._slot_offset(address)])

    def write(self, address: int, data: bytes | Iterable[int]) -> None:
        """Write bytes to RAM as the CPU would (writes to ROM are ignored)."""
        block = bytes(data)
        if address < 0 or address + len(block) > 0x10000:
            raise ValueError(
                f"write of {len(block)} bytes at {address:#x} leaves the 64 KiB address space"
            )
        for n, value in enumerate(block):
            if address + n >= 0x4000:
                self._image[self._slot_offset(address + n)] = value

    def display_memory(self) -> npt.NDArray[np.uint8]:
        """The 6912 bytes of the screen being shown (a live view, not a copy)."""
        page = 7 if self.model == "128k" and self._port_7ffd & 0x08 else 5
        start = _RAM_PAGE_SLOTS[page] * PAGE_SIZE
        return self._image[start : start + 6912]

    @property
    def flash_phase(self) -> bool:
        """Whether FLASH cells show swapped ink and paper now (it flips every 16 frames)."""
        return bool((self.frame_count // 16) & 1)

    def screen(self) -> npt.NDArray[np.uint8]:
        """The 192x256 screen as colour indices 0-15 (bright colours 8-15), FLASH applied."""
        return decode_screen(self.display_memory(), self.flash_phase)

    def render(
        self, lut: npt.NDArray[np.uint8], rows: slice = slice(0, 192)
    ) -> npt.NDArray[np.uint8]:
        """Screen rows through a colour look-up table (e.g. grayscale or RGB), FLASH applied."""
        return render_screen(self.display_memory(), self.flash_phase, lut, rows)

    def attributes(self) -> npt.NDArray[np.uint8]:
        """The 24x32 attribute bytes of the screen."""
        return decode_attributes(self.display_memory())

    @property
    def registers(self) -> Registers:
        return self.to_snapshot().registers

    @property
    def border(self) -> int:
        return int(self._state.border_colour)

    @border.setter
    def border(self, colour: int) -> None:
        self._state.border_colour = colour & 7

    @property
    def port_7ffd(self) -> int:
        return self._port_7ffd
