"""Load a tape into a 48K Spectrum through its ROM: LOAD "" with an instant-load trap.

The machine is switched on, LOAD "" is typed into the ROM's editor (the keyword
code and the quotes are put in LAST-K one at a time, as the keyboard interrupt
would), and the ROM's LD-BYTES routine (0x0556) is trapped: when the program
counter reaches it, the next data block comes off the tape, its flag byte is
checked against A and its length against DE, it is copied to IX and the routine
returns as the ROM does on success (carry set, IX advanced, DE = 0).

A program that reads the tape with its own loader (turbo blocks, usually) gets
the rest of the tape played in real time through the EAR bit of port 0xFE; a
call to LD-BYTES while the head is before a block's data still loads that block
instantly. Loading ends at the first instruction the program runs in RAM once no
block is left to read (after real-time playback, `settle_frames` later, so that a
custom loader has handed over to the program), or, when the program never runs
machine code, when BASIC waits for the keyboard again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..machine import ZXSpectrum
from ..snapshots import Snapshot
from .formats import Tape, TapeBlock, TapeError, read_tape
from .signal import TapePlayer, TapeSignal

ROM_LD_BYTES = 0x0556
ROM_KEY_INPUT = 0x10A8  # the editor's keyboard channel, polled while BASIC waits for a key
LAST_K = 0x5C08
FLAGS = 0x5C3B
BORDCR = 0x5C48
_NEW_KEY = 0x20  # FLAGS bit 5: LAST-K holds a key not yet read
LOAD_LINE = (0xEF, 0x22, 0x22, 0x0D)  # the LOAD keyword, '"', '"', ENTER
RAM = range(0x4000, 0x10000)

BOOT_FRAMES = 400  # power-on to the editor takes about 90
STEP_FRAMES = 3000  # the most frames the program may run between two tape events
SETTLE_FRAMES = 50  # after real-time playback, before stopping in RAM


@dataclass(frozen=True)
class TapeLoad:
    """The machine once a tape has loaded, and how it got there."""

    snapshot: Snapshot
    trapped: tuple[int, ...]  # blocks loaded instantly through LD-BYTES
    played: tuple[int, ...]  # data blocks played in real time
    frames: int  # emulated frames from power-on
    started: bool  # False when BASIC waits for the keyboard instead of running machine code


def load_tape(
    tape: Tape | str | Path,
    *,
    realtime: bool = True,
    step_frames: int = STEP_FRAMES,
    settle_frames: int = SETTLE_FRAMES,
) -> TapeLoad:
    """Switch on a 48K Spectrum, LOAD "" the tape and return the machine once the program runs.

    Raises TapeError naming the tape and the block when loading cannot go on. With
    `realtime=False` a block the program reads with its own loader is an error.
    """
    if not isinstance(tape, Tape):
        tape = read_tape(tape)
    return _Loader(tape, realtime, step_frames, settle_frames).run()


def run_out_of_halt(
    machine: ZXSpectrum, stops: range = range(0x10000), timeout_frames: int = 2
) -> None:
    """If the CPU is halted, run on to the next instruction in `stops` that it executes,
    a point a snapshot (which keeps no HALT state) can hold. Marks `stops` on the machine."""
    for _ in range(20):
        if not machine.halted:
            return
        before = machine.ticks
        machine.run_until_any([stops], timeout_frames)
        if machine.ticks == before:
            # The probe for HALT used up the step over the breakpoint the CPU stands on.
            machine.run_until_any([stops], timeout_frames)


class _Loader:
    def __init__(self, tape: Tape, realtime: bool, step_frames: int, settle_frames: int) -> None:
        self.tape = tape
        self.path = tape.path
        self.realtime = realtime
        self.step_frames = step_frames
        self.settle_frames = settle_frames
        self.position = 0  # index in tape.blocks of the next block under the head
        self.trapped: list[int] = []
        self.played: list[int] = []

    # -- the tape ---------------------------------------------------------------------

    def _next_data_block(self) -> TapeBlock | None:
        """The next data block from the head on, pressing play again past 'stop' blocks."""
        for block in self.tape.blocks[self.position :]:
            if block.is_data:
                return block
        return None

    def _blocks_left(self) -> bool:
        """Whether a data block comes before the next 'stop the tape' block."""
        for block in self.tape.blocks[self.position :]:
            if block.is_data:
                return True
            if block.stops_tape:
                return False
        return False

    # -- the run ----------------------------------------------------------------------

    def run(self) -> TapeLoad:
        machine = ZXSpectrum("48k")
        if machine.run_until(ROM_KEY_INPUT, BOOT_FRAMES) is None:
            raise TapeError(
                self.path, f"the 48K ROM did not reach its editor within {BOOT_FRAMES} frames"
            )
        for code in LOAD_LINE:
            if machine.run_until(ROM_KEY_INPUT, 100) is None:
                raise TapeError(
                    self.path, "the ROM's editor stopped reading keys while typing LOAD"
                )
            machine.write(LAST_K, [code])
            machine.write(FLAGS, [machine.read_byte(FLAGS) | _NEW_KEY])
        while True:
            machine, done = self._run_trapped(machine)
            if done:
                break
            if not self.realtime:
                block = self._next_data_block()
                assert block is not None
                kind = "turbo block" if block.block_id == 0x11 else f"{block.name} block"
                raise TapeError(
                    self.path,
                    f"{kind} {block.index} needs real-time loading (the program reads it with "
                    "its own loader), which is turned off",
                )
            machine = self._run_realtime(machine)
        started = machine.register("pc") in RAM
        if self.played and not started:
            raise TapeError(
                self.path,
                f"{self.tape.blocks[self.played[-1]].describe()} was played in real time, but "
                "then the program went back to BASIC instead of starting; expected its loader "
                "to run the program",
            )
        return TapeLoad(
            machine.to_snapshot(), tuple(self.trapped), tuple(self.played),
            machine.frame_count, started,
        )  # fmt: skip

    def _run_trapped(self, machine: ZXSpectrum) -> tuple[ZXSpectrum, bool]:
        """Run with LD-BYTES trapped until the program runs in RAM or waits for a key.

        Returns the machine and whether loading is over.
        """
        stops = (ROM_LD_BYTES, ROM_KEY_INPUT, RAM)
        while True:
            pc = machine.run_until_any(stops, self.step_frames)
            if pc is None:
                raise TapeError(
                    self.path,
                    f"the program neither ran nor read the tape for {self.step_frames} frames "
                    f"({self._where()}); expected it to start after loading",
                )
            if pc == ROM_LD_BYTES:
                block = self._next_data_block()
                if block is None:
                    a, de = machine.register("af") >> 8, machine.register("de")
                    ix = machine.register("ix")
                    raise TapeError(
                        self.path,
                        f"the program asks for another block (flag 0x{a:02X}, {de} bytes at "
                        f"0x{ix:04X}) but the tape has no blocks left",
                    )
                self._trap(machine, block)
            elif pc == ROM_KEY_INPUT:
                if self._blocks_left():
                    raise TapeError(
                        self.path,
                        f"BASIC waits for the keyboard with {self._where()} still to load; "
                        "expected the program to load it",
                    )
                return machine, True
            elif self._blocks_left():
                # The program reads the rest with its own loader; a fresh machine runs
                # it (this one stops at every instruction in RAM).
                fresh = ZXSpectrum("48k")
                fresh.load_state(machine.save_state())
                return fresh, False
            else:
                return self._settle(machine), True

    def _settle(self, machine: ZXSpectrum) -> ZXSpectrum:
        run_out_of_halt(machine, RAM, self.step_frames)
        return machine

    def _where(self) -> str:
        block = self._next_data_block()
        return block.describe() if block is not None else "no blocks left on the tape"

    def _run_realtime(self, machine: ZXSpectrum) -> ZXSpectrum:
        """Play the tape from the head into the EAR input until the blocks before the next
        stop are played (or trapped); returns a machine ready for `_run_trapped`."""
        while True:
            signal = TapeSignal(self.tape.blocks[self.position :], self.path)
            start = machine.ticks
            machine.set_ear_input(TapePlayer(signal, start).level)
            while True:
                hit = machine.run_until(ROM_LD_BYTES, 1)
                now = machine.ticks - start
                if hit is not None:
                    span, in_data = signal.block_at(now)
                    if span is not None and not in_data:
                        self.played += [s.block.index for s in signal.spans if s.end <= now]
                        self._trap(machine, span.block)
                        break  # the tape restarts after the trapped block
                    continue  # the head is in the block's data: the ROM reads it in real time
                if now >= signal.end:
                    self.played += [s.block.index for s in signal.spans]
                    self.position += signal.next_index
                    machine.set_ear_input(None)
                    machine.run_frames(self.settle_frames)
                    return self._rearm(machine)
            if not self._blocks_left():
                machine.set_ear_input(None)
                return self._rearm(machine)

    @staticmethod
    def _rearm(machine: ZXSpectrum) -> ZXSpectrum:
        fresh = ZXSpectrum("48k")
        fresh.load_state(machine.save_state())
        return fresh

    # -- the LD-BYTES trap --------------------------------------------------------------

    def _trap(self, machine: ZXSpectrum, block: TapeBlock) -> None:
        """Do what LD-BYTES does with `block`, then return from it to its caller."""
        self.position = block.index + 1
        self.trapped.append(block.index)
        af = machine.register("af")
        flag, load = af >> 8, bool(af & 1)  # carry set: LOAD, clear: VERIFY
        length, address = machine.register("de"), machine.register("ix")
        data = block.data
        ok = False
        if data and data[0] == flag:
            payload = data[1:-1]
            if len(data) < 2 or len(payload) != length:
                raise TapeError(
                    self.path,
                    f"{block.describe()} holds {max(len(data) - 2, 0)} bytes after its flag "
                    f"byte 0x{flag:02X}, but the program asks for {length} (DE); expected the "
                    f"same length",
                )
            parity = 0
            for byte in data:
                parity ^= byte
            if parity:
                raise TapeError(
                    self.path, f"{block.describe()} fails its checksum (the bytes XOR to "
                    f"0x{parity:02X}, expected 0); the tape is corrupt",
                )  # fmt: skip
            head = payload[: 0x10000 - address]
            if load:
                machine.write(address, head)
                machine.write(0, payload[len(head) :])  # wraps into ROM, which ignores it
                ok = True
            else:
                ok = machine.read(address, len(head)) == head
            machine.set_registers(ix=address + length, de=0, hl=data[-1])
        # The ROM leaves A = 0 and the flags of CP 1 on success; on failure carry is clear.
        machine.set_registers(af=0x0093 if ok else af & 0xFFFE)
        # SA/LD-RET: border back to BORDCR's, interrupts enabled; then RET to the caller.
        machine.border = (machine.read_byte(BORDCR) >> 3) & 7
        sp = machine.register("sp")
        ret = machine.read_byte(sp) | machine.read_byte((sp + 1) & 0xFFFF) << 8
        machine.set_registers(pc=ret, sp=sp + 2, iff1=1, iff2=1)
