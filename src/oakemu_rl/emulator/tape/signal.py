"""The EAR signal of tape blocks played in real time: edge times in T-states.

A pulse is the time between two edges; the level starts low, rises at the first
pulse after a pause and falls 1 ms into a pause if it was high (the TZX rules).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .formats import TapeBlock, TapeError

TICKS_PER_MS = 3500  # the 48K's 3.5 MHz clock


@dataclass(frozen=True)
class BlockSpan:
    """Where one data block lies in a TapeSignal: its pilot, its data and its end."""

    block: TapeBlock
    start: int
    data_start: int
    end: int


class TapeSignal:
    """Blocks laid out from tick 0 up to the first 'stop the tape' block (or the end).

    `next_index` is the position in `blocks` after what was laid out.
    """

    def __init__(self, blocks: Sequence[TapeBlock], path: str | Path) -> None:
        self._chunks: list[npt.NDArray[np.int64]] = []
        self._t = 0
        self._high = False
        self._after_pause = True
        self.spans: list[BlockSpan] = []
        n = 0
        loop: tuple[int, int] | None = None  # (first block of the loop body, repetitions left)
        while n < len(blocks):
            block = blocks[n]
            if block.stops_tape and self._t > 0:
                break
            if block.block_id == 0x24:
                loop = (n + 1, block.repetitions)
            elif block.block_id == 0x25 and loop is not None:
                first, left = loop
                if left > 1:
                    loop = (first, left - 1)
                    n = first
                    continue
                loop = None
            else:
                self._add(block, path)
            n += 1
        self.next_index = n
        self.end = self._t
        edges = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int64)
        self.edges = array("q", edges.astype(np.int64).tobytes())

    def _add(self, block: TapeBlock, path: str | Path) -> None:
        start = self._t
        kind = block.block_id
        if kind in (0x10, 0x11):
            self._pulses(np.full(block.pilot_pulses, block.pilot_pulse, np.int64))
            self._pulses(np.array(block.sync, np.int64))
        elif kind == 0x12:
            self._pulses(np.full(block.pilot_pulses, block.pilot_pulse, np.int64))
        elif kind == 0x13:
            self._pulses(np.array(block.pulses, np.int64))
        elif kind == 0x20:
            self._pause(block.pause_ms)
            return
        elif kind in (0x15, 0x18, 0x19, 0x23, 0x26, 0x27, 0x28):
            raise TapeError(path, f"{block.describe()} cannot be played in real time yet")
        if not block.is_data:
            return  # informational blocks take no time
        data_start = self._t
        bits = np.unpackbits(np.frombuffer(block.data, np.uint8))
        if block.data:
            bits = bits[: (len(block.data) - 1) * 8 + block.used_bits]
        zero, one = block.bit_pulses
        self._pulses(np.where(bits.astype(bool), one, zero).astype(np.int64).repeat(2))
        self.spans.append(BlockSpan(block, start, data_start, self._t))
        self._pause(block.pause_ms)

    def _pulses(self, durations: npt.NDArray[np.int64]) -> None:
        if not len(durations):
            return
        if self._after_pause and not self._high:
            self._chunks.append(np.array([self._t], np.int64))  # the level rises
            self._high = True
        self._after_pause = False
        times = self._t + np.cumsum(durations)
        self._chunks.append(times)
        self._t = int(times[-1])
        self._high ^= bool(len(durations) & 1)

    def _pause(self, ms: int) -> None:
        if ms <= 0:
            return
        if self._high:
            self._chunks.append(np.array([self._t + min(ms, 1) * TICKS_PER_MS], np.int64))
            self._high = False
        self._t += ms * TICKS_PER_MS
        self._after_pause = True

    def block_at(self, ticks: int) -> tuple[BlockSpan | None, bool]:
        """The first data block not yet played through at `ticks`, and whether its data
        has begun (the head is past its pilot and sync)."""
        for span in self.spans:
            if ticks < span.end:
                return span, ticks >= span.data_start
        return None, False


class TapePlayer:
    """Answers the EAR level of a TapeSignal started at machine tick `start`."""

    def __init__(self, signal: TapeSignal, start: int) -> None:
        self.signal = signal
        self.start = start
        self._edges = signal.edges
        self._cursor = 0

    def level(self, ticks: int) -> int:
        """1 when the EAR input is high at machine tick `ticks` (which must not go back)."""
        t = ticks - self.start
        edges, i = self._edges, self._cursor
        n = len(edges)
        while i < n and edges[i] <= t:
            i += 1
        self._cursor = i
        return i & 1
