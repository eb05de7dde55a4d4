"""The .z80 snapshot format, versions 1, 2 and 3, for 48K and 128K machines.

Version 1 is a 30-byte header followed by the 48 KiB of RAM, optionally
compressed. Versions 2 and 3 have PC = 0 in that header, an additional header
(23 bytes for v2, 54 or 55 for v3) and then one memory block per 16 KiB page.

Compression is a simple RLE: `ED ED nn bb` stands for `nn` copies of `bb`.
"""

from __future__ import annotations

import struct
from pathlib import Path

from ..errors import SnapshotError
from .model import PAGE_SIZE, MachineModel, Registers, Snapshot

# A, F, BC, HL, PC, SP, I, R, flags, DE, BC', DE', HL', A', F', IY, IX, IFF1, IFF2, flags 2.
HEADER_V1 = struct.Struct("<BBHHHHBBBHHHHBBHHBBB")
# Additional header length, PC, hardware mode, port 0x7FFD, IF1 paged, flags.
HEADER_EXT = struct.Struct("<HHBBBB")
BLOCK_HEADER = struct.Struct("<HB")
V1_END_MARKER = b"\x00\xed\xed\x00"
EXTRA_LENGTHS = {23: 2, 54: 3, 55: 3}  # additional header length -> version
UNCOMPRESSED_BLOCK = 0xFFFF
TICKS_PER_FRAME: dict[MachineModel, int] = {"48k": 69888, "128k": 70908}

# Page numbers of memory blocks -> RAM pages.
BLOCK_PAGES_48K = {8: 5, 4: 2, 5: 0}
BLOCK_PAGES_128K = {page + 3: page for page in range(8)}

_NAMES = {
    2: "SamRam", 7: "+3", 8: "+3", 9: "Pentagon 128", 10: "Scorpion 256", 11: "Didaktik Kompakt",
    13: "+2A", 14: "TC2048", 15: "TC2068", 128: "TS2068",
}  # fmt: skip
_HARDWARE: dict[int, dict[int, tuple[MachineModel | None, str]]] = {
    2: {0: ("48k", "48K"), 1: ("48k", "48K + Interface 1"), 3: ("128k", "128K"),
        4: ("128k", "128K + Interface 1"), 12: ("128k", "+2")},
    3: {0: ("48k", "48K"), 1: ("48k", "48K + Interface 1"), 3: ("48k", "48K + M.G.T."),
        4: ("128k", "128K"), 5: ("128k", "128K + Interface 1"), 6: ("128k", "128K + M.G.T."),
        12: ("128k", "+2")},
}  # fmt: skip


class _CorruptData(Exception):
    """Raised by the RLE decoder; the caller adds the file name and context."""


def rle_decode(src: bytes, size: int) -> tuple[bytes, int]:
    """Decode .z80 RLE data until `size` bytes come out.

    Returns the decoded bytes and how many bytes of `src` were used. Raises
    _CorruptData when `src` ends early or a run overshoots `size`.
    """
    out = bytearray()
    pos = 0
    while len(out) < size:
        wanted = size - len(out)
        mark = src.find(b"\xed\xed", pos)
        if mark == -1 or mark - pos >= wanted:
            literal = src[pos : pos + wanted]
            out += literal
            pos += len(literal)
            if len(literal) < wanted:
                raise _CorruptData(f"data ends after {len(out)} of {size} bytes")
            break
        out += src[pos:mark]
        if mark + 4 > len(src):
            raise _CorruptData(f"data ends inside a run after {len(out)} of {size} bytes")
        count, value = src[mark + 2], src[mark + 3]
        if count == 0:
            raise _CorruptData(f"a run of length 0 after {len(out)} of {size} bytes")
        if len(out) + count > size:
            raise _CorruptData(f"a run of {count} bytes overshoots the {size} expected")
        out += bytes((value,)) * count
        pos = mark + 4
    return bytes(out), pos


def rle_encode(data: bytes) -> bytes:
    """Compress with the .z80 RLE: runs of 5 or more (2 or more for ED) become ED ED nn bb.

    A byte right after a single literal ED is never the start of a run, as the
    format requires.
    """
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        value = data[i]
        j = i + 1
        while j < n and data[j] == value and j - i < 255:
            j += 1
        run = j - i
        if run >= 5 or (value == 0xED and run >= 2):
            out += bytes((0xED, 0xED, run, value))
            i = j
        elif value == 0xED:  # a single ED: it and the byte after it are literal
            out += data[i : i + 2]
            i += 2
        else:
            out += data[i:j]
            i = j
    return bytes(out)


def read_z80(data: bytes, path: str | Path = "<bytes>") -> Snapshot:
    """Parse a .z80 image of version 1, 2 or 3 (48K or 128K)."""
    if len(data) < HEADER_V1.size:
        raise SnapshotError(
            path, f"Z80 header is truncated: {len(data)} bytes, expected at least {HEADER_V1.size}"
        )
    (a, f, bc, hl, pc, sp, i, r, flags, de, bc_, de_, hl_, a_, f_, iy, ix, iff1, iff2, flags2) = (
        HEADER_V1.unpack_from(data)
    )
    if flags == 0xFF:  # some old writers; the format says to read it as 1
        flags = 1
    im = flags2 & 3
    if im == 3:
        raise SnapshotError(path, "Z80 header has interrupt mode 3, expected 0, 1 or 2")
    regs = Registers(
        af=(a << 8) | f, bc=bc, de=de, hl=hl, af_=(a_ << 8) | f_, bc_=bc_, de_=de_, hl_=hl_,
        ix=ix, iy=iy, sp=sp, pc=pc, i=i, r=(r & 0x7F) | ((flags & 1) << 7),
        iff1=bool(iff1), iff2=bool(iff2), im=im,
    )  # fmt: skip
    border = (flags >> 1) & 7
    if pc != 0:
        return _read_v1(data, path, regs, border, compressed=bool(flags & 0x20))
    return _read_v23(data, path, regs, border)


def _read_v1(
    data: bytes, path: str | Path, regs: Registers, border: int, compressed: bool
) -> Snapshot:
    body = data[HEADER_V1.size :]
    size = 3 * PAGE_SIZE
    if not compressed:
        if len(body) < size:
            raise SnapshotError(
                path, f"Z80 v1 memory is truncated: {len(body)} of {size} bytes present"
            )
        return Snapshot.from_48k_memory(body[:size], regs, border=border)
    try:
        memory, used = rle_decode(body, size)
    except _CorruptData as exc:
        raise SnapshotError(
            path, f"Z80 v1 compressed memory is corrupt or truncated: {exc}"
        ) from None
    rest = body[used:]
    if rest not in (b"", V1_END_MARKER):
        raise SnapshotError(
            path,
            f"Z80 v1 compressed memory has {len(rest)} unexpected bytes after it "
            "(expected only the end marker 00 ED ED 00)",
        )
    return Snapshot.from_48k_memory(memory, regs, border=border)


def _read_v23(data: bytes, path: str | Path, regs: Registers, border: int) -> Snapshot:
    if len(data) < HEADER_V1.size + 2:
        raise SnapshotError(path, "Z80 header is truncated before the additional header length")
    extra_length = struct.unpack_from("<H", data, HEADER_V1.size)[0]
    version = EXTRA_LENGTHS.get(extra_length)
    if version is None:
        raise SnapshotError(
            path,
            f"unknown Z80 version: additional header length {extra_length}, "
            "expected 23 (v2) or 54/55 (v3)",
        )
    start = HEADER_V1.size + 2 + extra_length
    if len(data) < start:
        raise SnapshotError(
            path,
            f"Z80 v{version} header is truncated: {len(data)} bytes, expected at least {start}",
        )
    _, pc, hardware, port_7ffd, _, flags3 = HEADER_EXT.unpack_from(data, HEADER_V1.size)
    regs.pc = pc
    model = _machine(path, version, hardware, modified=bool(flags3 & 0x80))
    tstates = 0
    if version == 3:
        low, high = struct.unpack_from("<HB", data, 55)
        tstates = _tstates_from_counters(model, low, high)
    pages = _read_blocks(data, start, path, model)
    if model == "48k":
        port_7ffd = 0
    return Snapshot(model, regs, pages, border=border, port_7ffd=port_7ffd, tstates=tstates)


def _machine(path: str | Path, version: int, hardware: int, modified: bool) -> MachineModel:
    model, name = _HARDWARE[version].get(hardware, (None, _NAMES.get(hardware, "unknown")))
    if model == "48k" and modified:
        model, name = None, "16K"
    if model is None:
        raise SnapshotError(
            path,
            f"unsupported machine {name!r} (Z80 v{version} hardware mode {hardware}); "
            "expected 48K or 128K",
        )
    return model


def _read_blocks(data: bytes, pos: int, path: str | Path, model: MachineModel) -> dict[int, bytes]:
    mapping = BLOCK_PAGES_48K if model == "48k" else BLOCK_PAGES_128K
    pages: dict[int, bytes] = {}
    while pos < len(data):
        if pos + BLOCK_HEADER.size > len(data):
            raise SnapshotError(path, f"Z80 memory block header at offset {pos} is truncated")
        length, number = BLOCK_HEADER.unpack_from(data, pos)
        pos += BLOCK_HEADER.size
        page = mapping.get(number)
        if page is None:
            raise SnapshotError(
                path,
                f"Z80 memory block has bad page number {number} for a {model.upper()} "
                f"snapshot (expected one of {sorted(mapping)})",
            )
        if page in pages:
            raise SnapshotError(path, f"Z80 memory block for page {number} appears twice")
        size = PAGE_SIZE if length == UNCOMPRESSED_BLOCK else length
        block = data[pos : pos + size]
        if len(block) < size:
            raise SnapshotError(
                path,
                f"Z80 memory block for page {number} is truncated: "
                f"{len(block)} of {size} bytes present",
            )
        pos += size
        if length == UNCOMPRESSED_BLOCK:
            pages[page] = block
            continue
        try:
            decoded, used = rle_decode(block, PAGE_SIZE)
        except _CorruptData as exc:
            raise SnapshotError(
                path, f"Z80 compressed memory block for page {number} is corrupt: {exc}"
            ) from None
        if used != len(block):
            raise SnapshotError(
                path,
                f"Z80 compressed memory block for page {number} is corrupt: "
                f"{len(block) - used} bytes left over after {PAGE_SIZE} bytes decoded",
            )
        pages[page] = decoded
    missing = sorted(number for number, page in mapping.items() if page not in pages)
    if missing:
        raise SnapshotError(path, f"Z80 file is missing the memory block(s) for page(s) {missing}")
    return pages


def _tstates_from_counters(model: MachineModel, low: int, high: int) -> int:
    """Turn the v3 T-state counters into T-states since the frame interrupt."""
    frame = TICKS_PER_FRAME[model]
    quarter = frame // 4
    tstates = ((high + 1) % 4 + 1) * quarter - (low + 1)
    return tstates if 0 <= tstates < frame else 0


def _counters_from_tstates(model: MachineModel, tstates: int) -> tuple[int, int]:
    quarter = TICKS_PER_FRAME[model] // 4
    tstates %= 4 * quarter
    return quarter - tstates % quarter - 1, (tstates // quarter + 3) % 4


def write_z80(snapshot: Snapshot, version: int = 3, compress: bool = True) -> bytes:
    """Encode a snapshot as .z80.

    Version 3 (the default) and 2 handle 48K and 128K; version 1 only 48K with a
    non-zero PC. `compress=False` stores memory uncompressed (versions 1 and 3).
    T-states survive only in version 3.
    """
    if version not in (1, 2, 3):
        raise ValueError(f"Z80 version must be 1, 2 or 3, got {version}")
    regs = snapshot.registers
    if version == 1 and snapshot.model != "48k":
        raise ValueError("Z80 version 1 holds only 48K snapshots")
    if version == 1 and regs.pc & 0xFFFF == 0:
        raise ValueError("Z80 version 1 cannot store PC = 0 (it marks versions 2 and 3)")
    if version == 2 and not compress:
        raise ValueError("Z80 version 2 cannot store uncompressed memory blocks")
    r = regs.r & 0xFF
    flags = (r >> 7) | ((snapshot.border & 7) << 1)
    if version == 1 and compress:
        flags |= 0x20
    header = HEADER_V1.pack(
        regs.af >> 8 & 0xFF, regs.af & 0xFF, regs.bc & 0xFFFF, regs.hl & 0xFFFF,
        regs.pc & 0xFFFF if version == 1 else 0, regs.sp & 0xFFFF, regs.i & 0xFF, r & 0x7F,
        flags, regs.de & 0xFFFF, regs.bc_ & 0xFFFF, regs.de_ & 0xFFFF, regs.hl_ & 0xFFFF,
        regs.af_ >> 8 & 0xFF, regs.af_ & 0xFF, regs.iy & 0xFFFF, regs.ix & 0xFFFF,
        int(regs.iff1), int(regs.iff2), regs.im & 3,
    )  # fmt: skip
    if version == 1:
        memory = snapshot.memory_48k()
        return header + (rle_encode(memory) + V1_END_MARKER if compress else memory)
    return header + _extra_header(snapshot, version) + _write_blocks(snapshot, version, compress)


def _extra_header(snapshot: Snapshot, version: int) -> bytes:
    extra_length = 23 if version == 2 else 54
    hardware = 0 if snapshot.model == "48k" else (3 if version == 2 else 4)
    port_7ffd = snapshot.port_7ffd & 0xFF if snapshot.model == "128k" else 0
    body = bytearray(2 + extra_length)
    HEADER_EXT.pack_into(
        body, 0, extra_length, snapshot.registers.pc & 0xFFFF, hardware, port_7ffd, 0, 0
    )
    if version == 3:
        low, high = _counters_from_tstates(snapshot.model, snapshot.tstates)
        struct.pack_into("<HB", body, 55 - HEADER_V1.size, low, high)
    return bytes(body)


def _write_blocks(snapshot: Snapshot, version: int, compress: bool) -> bytes:
    mapping = BLOCK_PAGES_48K if snapshot.model == "48k" else BLOCK_PAGES_128K
    out = bytearray()
    for number in sorted(mapping):
        block = snapshot.ram_pages[mapping[number]]
        packed = rle_encode(block) if compress else block
        # Version 3 may store a block raw (length 0xFFFF) when RLE does not help.
        if version == 3 and len(packed) >= PAGE_SIZE:
            out += BLOCK_HEADER.pack(UNCOMPRESSED_BLOCK, number) + block
        else:
            out += BLOCK_HEADER.pack(len(packed), number) + packed
    return bytes(out)
