"""The .sna snapshot format (48K: 27-byte header + 48 KiB; 128K: extended)."""

from __future__ import annotations

import struct
from pathlib import Path

from ..errors import SnapshotError
from .model import PAGE_SIZE, Registers, Snapshot

# I, HL', DE', BC', AF', HL, DE, BC, IY, IX, IFF2, R, AF, SP, IM, border: 27 bytes.
HEADER = struct.Struct("<B9HBBHHBB")
SIZE_48K = HEADER.size + 3 * PAGE_SIZE
SIZE_128K_SHORT = SIZE_48K + 4 + 5 * PAGE_SIZE
SIZE_128K_LONG = SIZE_48K + 4 + 6 * PAGE_SIZE


def read_sna(data: bytes, path: str | Path = "<bytes>") -> Snapshot:
    """Parse a .sna image. The 48K form keeps PC on the stack, as the format says."""
    if len(data) not in (SIZE_48K, SIZE_128K_SHORT, SIZE_128K_LONG):
        what = "truncated" if len(data) < SIZE_48K else "of an unexpected size"
        raise SnapshotError(
            path,
            f"SNA file is {what}: {len(data)} bytes, expected {SIZE_48K} (48K) "
            f"or {SIZE_128K_SHORT}/{SIZE_128K_LONG} (128K)",
        )
    (i, hl_, de_, bc_, af_, hl, de, bc, iy, ix, iff, r, af, sp, im, border) = HEADER.unpack_from(
        data
    )
    if im > 2:
        raise SnapshotError(path, f"SNA header has interrupt mode {im}, expected 0, 1 or 2")
    regs = Registers(
        af=af, bc=bc, de=de, hl=hl, af_=af_, bc_=bc_, de_=de_, hl_=hl_, ix=ix, iy=iy,
        sp=sp, pc=0, i=i, r=r, iff1=bool(iff & 4), iff2=bool(iff & 4), im=im,
    )  # fmt: skip
    ram = data[HEADER.size : SIZE_48K]
    if len(data) == SIZE_48K:
        snap = Snapshot.from_48k_memory(ram, regs, border=border & 7)
        # RETN: pop PC from the stack.
        offset = sp - 0x4000
        if not 0 <= offset < len(ram) - 1:
            raise SnapshotError(path, f"SNA stack pointer 0x{sp:04X} is outside RAM")
        regs.pc = ram[offset] | (ram[offset + 1] << 8)
        regs.sp = (sp + 2) & 0xFFFF
        return snap
    pc, port_7ffd, _trdos = struct.unpack_from("<HBB", data, SIZE_48K)
    regs.pc = pc
    high = port_7ffd & 7
    pages = {5: ram[:PAGE_SIZE], 2: ram[PAGE_SIZE : 2 * PAGE_SIZE], high: ram[2 * PAGE_SIZE :]}
    rest = data[SIZE_48K + 4 :]
    others = [p for p in (0, 1, 3, 4, 6, 7) if p != high]
    if len(rest) < len(others) * PAGE_SIZE:
        raise SnapshotError(path, "128K SNA file is truncated")
    for n, page in enumerate(others):
        pages[page] = rest[n * PAGE_SIZE : (n + 1) * PAGE_SIZE]
    return Snapshot("128k", regs, pages, border=border & 7, port_7ffd=port_7ffd)


def write_sna(snapshot: Snapshot) -> bytes:
    """Encode a snapshot as .sna. A 48K snapshot pushes PC onto its stack (the format's rule)."""
    regs = snapshot.registers
    sp = regs.sp
    memory = bytearray(snapshot.memory_48k())
    if snapshot.model == "48k":
        sp = (sp - 2) & 0xFFFF
        if not 0x4000 <= sp <= 0xFFFE:
            raise ValueError(f"cannot push PC for a 48K SNA: SP 0x{regs.sp:04X} is not in RAM")
        memory[sp - 0x4000] = regs.pc & 0xFF
        memory[sp - 0x4000 + 1] = regs.pc >> 8
    header = HEADER.pack(
        regs.i, regs.hl_, regs.de_, regs.bc_, regs.af_, regs.hl, regs.de, regs.bc,
        regs.iy, regs.ix, 4 if regs.iff2 else 0, regs.r & 0xFF, regs.af, sp, regs.im,
        snapshot.border & 7,
    )  # fmt: skip
    out = header + bytes(memory)
    if snapshot.model == "48k":
        return out
    high = snapshot.port_7ffd & 7
    out += struct.pack("<HBB", regs.pc, snapshot.port_7ffd, 0)
    for page in (0, 1, 3, 4, 6, 7):
        if page != high:
            out += snapshot.ram_pages[page]
    return out
