"""Tape images: .tap (bare blocks) and .tzx (blocks with timings), parsed into TapeBlocks.

A .tap file is a run of blocks, each a 2-byte length and that many bytes (flag byte,
data, checksum), all at the ROM's standard speed. A .tzx file starts with
"ZXTape!" and holds blocks of many kinds; we keep the data blocks (0x10 standard
speed, 0x11 turbo speed, 0x14 pure data), the signal blocks (0x12 pure tone, 0x13
pulses, 0x20 pause) and list every other kind (text, archive info, groups, ...) as
informational.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import EmulatorError

TAPE_SUFFIXES = (".tap", ".tzx")

TZX_MAGIC = b"ZXTape!\x1a"

# The ROM's timings in T-states (SA-BYTES / LD-BYTES).
STANDARD_PILOT = 2168
STANDARD_SYNC = (667, 735)
STANDARD_BITS = (855, 1710)
HEADER_PILOT_PULSES = 8063  # flag byte < 0x80
DATA_PILOT_PULSES = 3223

BLOCK_NAMES: dict[int, str] = {
    0x10: "standard speed data", 0x11: "turbo speed data", 0x12: "pure tone",
    0x13: "pulse sequence", 0x14: "pure data", 0x15: "direct recording",
    0x18: "CSW recording", 0x19: "generalized data", 0x20: "pause",
    0x21: "group start", 0x22: "group end", 0x23: "jump to block", 0x24: "loop start",
    0x25: "loop end", 0x26: "call sequence", 0x27: "return from sequence",
    0x28: "select block", 0x2A: "stop the tape if in 48K mode", 0x2B: "set signal level",
    0x30: "text description", 0x31: "message", 0x32: "archive info", 0x33: "hardware type",
    0x34: "emulation info", 0x35: "custom info", 0x40: "snapshot", 0x5A: "glue",
}  # fmt: skip
DATA_BLOCK_IDS = frozenset((0x10, 0x11, 0x14))


class TapeError(EmulatorError):
    """A tape file is missing, corrupt or cannot be loaded; the message names the file."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


@dataclass(frozen=True)
class TapeBlock:
    """One block of a tape image, numbered from 0 in file order (as `tzxlist` numbers them).

    A data block's `data` is what the loader reads: the flag byte, the payload and
    the checksum. Timings are in T-states; `pulses` lists a 0x13 block's pulses.
    """

    index: int
    block_id: int
    data: bytes = b""
    pause_ms: int = 0
    pilot_pulse: int = 0
    pilot_pulses: int = 0
    sync: tuple[int, int] = (0, 0)
    bit_pulses: tuple[int, int] = (0, 0)  # the two pulses of a 0 bit and of a 1 bit
    used_bits: int = 8  # bits used in the last byte
    pulses: tuple[int, ...] = ()
    repetitions: int = 0  # a loop start's count
    text: str = ""

    @property
    def name(self) -> str:
        return BLOCK_NAMES.get(self.block_id, f"unknown block type 0x{self.block_id:02X}")

    @property
    def is_data(self) -> bool:
        """Whether a loader reads bytes from this block (0x10, 0x11, 0x14)."""
        return self.block_id in DATA_BLOCK_IDS

    @property
    def stops_tape(self) -> bool:
        """A 'stop the tape' command: a 0x20 pause of 0 ms or a 0x2A block."""
        return (self.block_id == 0x20 and self.pause_ms == 0) or self.block_id == 0x2A

    def describe(self) -> str:
        """E.g. 'block 2 (turbo speed data, 1058 bytes)'."""
        size = f", {len(self.data)} bytes" if self.is_data else ""
        return f"block {self.index} ({self.name}{size})"


@dataclass(frozen=True)
class Tape:
    """A parsed tape image and the SHA-256 of its file."""

    path: Path
    blocks: tuple[TapeBlock, ...]
    sha256: str

    @property
    def data_blocks(self) -> tuple[TapeBlock, ...]:
        return tuple(b for b in self.blocks if b.is_data)


def is_tape_path(path: str | Path) -> bool:
    """Whether the file name ends in .tap or .tzx."""
    return Path(path).suffix.lower() in TAPE_SUFFIXES


def standard_block(index: int, data: bytes, pause_ms: int = 1000) -> TapeBlock:
    """A block at the ROM's speed: a header's long pilot when the flag byte is below 0x80."""
    header = not data or data[0] < 0x80
    return TapeBlock(
        index, 0x10, bytes(data), pause_ms, STANDARD_PILOT,
        HEADER_PILOT_PULSES if header else DATA_PILOT_PULSES, STANDARD_SYNC, STANDARD_BITS,
    )  # fmt: skip


def read_tape(path: str | Path) -> Tape:
    """Read a .tap or .tzx file (chosen by its extension), raising TapeError naming it."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TAPE_SUFFIXES:
        raise TapeError(path, f"unknown tape format {path.suffix!r}; expected .tap or .tzx")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TapeError(path, "file not found") from None
    except IsADirectoryError:
        raise TapeError(path, "is a directory, expected a tape file") from None
    except OSError as exc:
        raise TapeError(path, f"cannot be read: {exc.strerror or exc}") from None
    blocks = read_tap(data, path) if suffix == ".tap" else read_tzx(data, path)
    if not any(b.is_data for b in blocks):
        raise TapeError(path, "holds no data blocks; expected at least one block to load")
    return Tape(path, blocks, hashlib.sha256(data).hexdigest())


def read_tap(data: bytes, path: str | Path = "<bytes>") -> tuple[TapeBlock, ...]:
    """Parse a .tap image: blocks of a 2-byte little-endian length and that many bytes."""
    blocks: list[TapeBlock] = []
    pos = 0
    while pos < len(data):
        if pos + 2 > len(data):
            raise TapeError(path, f"block {len(blocks)} at offset {pos}: truncated length field")
        (size,) = struct.unpack_from("<H", data, pos)
        if pos + 2 + size > len(data):
            raise TapeError(
                path,
                f"block {len(blocks)} at offset {pos} claims {size} bytes but only "
                f"{len(data) - pos - 2} remain",
            )
        blocks.append(standard_block(len(blocks), data[pos + 2 : pos + 2 + size]))
        pos += 2 + size
    return tuple(blocks)


class _Reader:
    """Reads little-endian fields from a TZX file, raising TapeError when it runs short."""

    def __init__(self, data: bytes, path: str | Path) -> None:
        self.data, self.path, self.pos = data, path, 0
        self.block = 0

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise TapeError(
                self.path,
                f"TZX block {self.block} is truncated at offset {self.pos}: needs {size} more "
                f"bytes, {len(self.data) - self.pos} remain",
            )
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return int.from_bytes(self.take(2), "little")

    def u24(self) -> int:
        return int.from_bytes(self.take(3), "little")

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "little")


def read_tzx(data: bytes, path: str | Path = "<bytes>") -> tuple[TapeBlock, ...]:
    """Parse a .tzx image (version 1.x)."""
    if data[: len(TZX_MAGIC)] != TZX_MAGIC or len(data) < 10:
        raise TapeError(path, f"not a TZX file: expected it to start with {TZX_MAGIC!r}")
    if data[8] != 1:
        raise TapeError(path, f"unsupported TZX version {data[8]}.{data[9]}, expected 1.x")
    reader = _Reader(data, path)
    reader.pos = 10
    blocks: list[TapeBlock] = []
    while reader.pos < len(data):
        reader.block = len(blocks)
        blocks.append(_read_tzx_block(reader, len(blocks), reader.u8()))
    return tuple(blocks)


def _read_tzx_block(r: _Reader, index: int, block_id: int) -> TapeBlock:
    if block_id == 0x10:
        pause = r.u16()
        return standard_block(index, r.take(r.u16()), pause)
    if block_id == 0x11:
        pilot, sync1, sync2, zero, one, pilot_pulses, used = struct.unpack("<6HB", r.take(13))
        pause = r.u16()
        return TapeBlock(
            index, 0x11, r.take(r.u24()), pause, pilot, pilot_pulses, (sync1, sync2),
            (zero, one), used or 8,
        )  # fmt: skip
    if block_id == 0x12:
        pulse, count = r.u16(), r.u16()
        return TapeBlock(index, 0x12, pilot_pulse=pulse, pilot_pulses=count)
    if block_id == 0x13:
        count = r.u8()
        return TapeBlock(index, 0x13, pulses=struct.unpack(f"<{count}H", r.take(2 * count)))
    if block_id == 0x14:
        zero, one, used, pause = struct.unpack("<HHBH", r.take(7))
        return TapeBlock(
            index, 0x14, r.take(r.u24()), pause, bit_pulses=(zero, one), used_bits=used or 8
        )
    if block_id == 0x20:
        return TapeBlock(index, 0x20, pause_ms=r.u16())
    if block_id == 0x24:
        return TapeBlock(index, 0x24, repetitions=r.u16())
    if block_id in (0x21, 0x30):
        return TapeBlock(index, block_id, text=r.take(r.u8()).decode("latin-1"))
    if block_id == 0x31:
        r.u8()  # seconds to show it
        return TapeBlock(index, 0x31, text=r.take(r.u8()).decode("latin-1"))
    # Blocks we only step over, by the size the TZX 1.20 specification gives them.
    if block_id in (0x22, 0x25, 0x27):
        size = 0
    elif block_id in (0x23,):
        size = 2
    elif block_id == 0x15:
        r.take(5)
        size = r.u24()
    elif block_id in (0x18, 0x19, 0x2A, 0x2B):
        size = r.u32()
    elif block_id in (0x26,):
        size = 2 * r.u16()
    elif block_id in (0x28, 0x32):
        size = r.u16()
    elif block_id == 0x33:
        size = 3 * r.u8()
    elif block_id == 0x34:
        size = 8
    elif block_id == 0x35:
        r.take(10)  # the identification string
        size = r.u32()
    elif block_id == 0x40:
        r.take(1)
        size = r.u24()
    elif block_id == 0x5A:
        size = 9
    else:
        # The specification's rule for block types it does not define: a 4-byte length.
        size = r.u32()
    r.take(size)
    return TapeBlock(index, block_id)
