"""The .szx (ZX-State) snapshot format, for 48K and 128K machines.

An 8-byte header ("ZXST", major and minor version, machine id, flags) is
followed by blocks, each a 4-byte id and a 4-byte little-endian size. We read
Z80R (registers), SPCR (border and paging) and RAMP (one RAM page, raw or
zlib-compressed) and skip every other block (KEYB, JOY, AY, CRTR, ...).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from ..errors import SnapshotError
from .model import PAGE_SIZE, PAGES_48K, MachineModel, Registers, Snapshot

MAGIC = b"ZXST"
HEADER = struct.Struct("<4sBBBB")  # magic, major, minor, machine id, flags
BLOCK = struct.Struct("<4sI")  # id, size
VERSION = (1, 4)
# AF, BC, DE, HL, AF', BC', DE', HL', IX, IY, SP, PC, I, R, IFF1, IFF2, IM.
Z80R_REGS = struct.Struct("<12HBBBBB")
Z80R_SIZE = 37  # the registers, dwCyclesStart, chHoldIntReqCycles, chFlags, wMemPtr
SPCR = struct.Struct("<BBBB4x")  # border, 7FFD, 1FFD/EFF7, FE
RAMP_HEADER = struct.Struct("<HB")  # flags, page number
RAMP_COMPRESSED = 1
CREATOR = b"oakemu_rl"

MACHINE_IDS: dict[MachineModel, int] = {"48k": 1, "128k": 2}
_MODELS: dict[int, MachineModel] = {1: "48k", 2: "128k", 3: "128k"}  # 3 is the +2
_NAMES = {
    0: "16K", 4: "+2A", 5: "+3", 6: "+3e", 7: "Pentagon 128", 8: "TC2048", 9: "TC2068",
    10: "Scorpion 256", 11: "ZX Spectrum SE", 12: "TS2068", 13: "Pentagon 512",
    14: "Pentagon 1024", 15: "NTSC 48K", 16: "128Ke",
}  # fmt: skip


def read_szx(data: bytes, path: str | Path = "<bytes>") -> Snapshot:
    """Parse a .szx image of a 48K or 128K machine."""
    if len(data) < HEADER.size:
        raise SnapshotError(
            path, f"SZX header is truncated: {len(data)} bytes, expected at least {HEADER.size}"
        )
    magic, major, minor, machine_id, _flags = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SnapshotError(path, f"not an SZX file: magic {magic!r}, expected {MAGIC!r}")
    if major != 1:
        raise SnapshotError(path, f"unsupported SZX version {major}.{minor}, expected 1.x")
    model = _MODELS.get(machine_id)
    if model is None:
        name = _NAMES.get(machine_id, "unknown")
        raise SnapshotError(
            path,
            f"unsupported machine {name!r} (SZX machine id {machine_id}); expected 48K or 128K",
        )
    blocks = _read_blocks(data, path)
    z80r = blocks.get(b"Z80R")
    if z80r is None:
        raise SnapshotError(path, "SZX file is missing the required Z80R (registers) block")
    regs, tstates = _parse_z80r(z80r[0], path)
    border, port_7ffd = 7, 0
    if b"SPCR" in blocks:  # optional: without it the machine is as just reset
        border, port_7ffd = _parse_spcr(blocks[b"SPCR"][0], path)
    pages = _parse_ramps(blocks.get(b"RAMP", []), path, model)
    if model == "48k":
        port_7ffd = 0
    return Snapshot(model, regs, pages, border=border, port_7ffd=port_7ffd, tstates=tstates)


def _read_blocks(data: bytes, path: str | Path) -> dict[bytes, list[bytes]]:
    """Split the body into blocks: id -> the bodies of every block with that id."""
    blocks: dict[bytes, list[bytes]] = {}
    pos = HEADER.size
    while pos < len(data):
        if pos + BLOCK.size > len(data):
            raise SnapshotError(
                path,
                f"SZX block header at offset {pos} is truncated: "
                f"{len(data) - pos} of {BLOCK.size} bytes present",
            )
        block_id, size = BLOCK.unpack_from(data, pos)
        pos += BLOCK.size
        body = data[pos : pos + size]
        if len(body) < size:
            raise SnapshotError(
                path,
                f"SZX block {_show_id(block_id)} at offset {pos - BLOCK.size} is truncated: "
                f"{len(body)} of {size} bytes present",
            )
        blocks.setdefault(block_id, []).append(body)
        pos += size
    return blocks


def _show_id(block_id: bytes) -> str:
    return repr(block_id.decode("latin-1"))


def _parse_z80r(body: bytes, path: str | Path) -> tuple[Registers, int]:
    if len(body) < Z80R_REGS.size:
        raise SnapshotError(
            path,
            f"SZX Z80R block is too short: {len(body)} bytes, expected {Z80R_SIZE}",
        )
    (af, bc, de, hl, af_, bc_, de_, hl_, ix, iy, sp, pc, i, r, iff1, iff2, im) = (
        Z80R_REGS.unpack_from(body)
    )
    if im > 2:
        raise SnapshotError(path, f"SZX Z80R block has interrupt mode {im}, expected 0, 1 or 2")
    regs = Registers(
        af=af, bc=bc, de=de, hl=hl, af_=af_, bc_=bc_, de_=de_, hl_=hl_, ix=ix, iy=iy,
        sp=sp, pc=pc, i=i, r=r, iff1=bool(iff1), iff2=bool(iff2), im=im,
    )  # fmt: skip
    tstates = 0
    if len(body) >= Z80R_REGS.size + 4:
        tstates = struct.unpack_from("<I", body, Z80R_REGS.size)[0]
    return regs, tstates


def _parse_spcr(body: bytes, path: str | Path) -> tuple[int, int]:
    if len(body) < 2:
        raise SnapshotError(
            path, f"SZX SPCR block is too short: {len(body)} bytes, expected {SPCR.size}"
        )
    return body[0] & 7, body[1]


def _parse_ramps(bodies: list[bytes], path: str | Path, model: MachineModel) -> dict[int, bytes]:
    expected = set(PAGES_48K) if model == "48k" else set(range(8))
    pages: dict[int, bytes] = {}
    for body in bodies:
        if len(body) < RAMP_HEADER.size:
            raise SnapshotError(
                path, f"SZX RAMP block is too short: {len(body)} bytes, expected a page header"
            )
        flags, page = RAMP_HEADER.unpack_from(body)
        if page not in expected:
            raise SnapshotError(
                path,
                f"SZX RAMP block has bad page number {page} for a {model.upper()} snapshot "
                f"(expected one of {sorted(expected)})",
            )
        if page in pages:
            raise SnapshotError(path, f"SZX RAMP block for page {page} appears twice")
        payload = body[RAMP_HEADER.size :]
        if flags & RAMP_COMPRESSED:
            payload = _inflate(payload, page, path)
        if len(payload) != PAGE_SIZE:
            raise SnapshotError(
                path,
                f"SZX RAMP block for page {page} holds {len(payload)} bytes, expected {PAGE_SIZE}",
            )
        pages[page] = payload
    missing = sorted(expected - set(pages))
    if missing:
        raise SnapshotError(path, f"SZX file is missing the RAMP block(s) for page(s) {missing}")
    return pages


def _inflate(payload: bytes, page: int, path: str | Path) -> bytes:
    """Decompress one page, reading at most one byte more than a page (so no zip bombs)."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(payload, PAGE_SIZE + 1)
    except zlib.error as exc:
        raise SnapshotError(
            path, f"SZX RAMP block for page {page} has corrupt zlib data: {exc}"
        ) from None
    if not inflater.eof and len(out) <= PAGE_SIZE:
        raise SnapshotError(
            path, f"SZX RAMP block for page {page} has truncated zlib data ({len(out)} bytes)"
        )
    return out


def write_szx(snapshot: Snapshot, compress: bool = True) -> bytes:
    """Encode a snapshot as .szx version 1.4, RAM pages zlib-compressed unless `compress=False`."""
    regs = snapshot.registers
    out = bytearray(HEADER.pack(MAGIC, *VERSION, MACHINE_IDS[snapshot.model], 0))
    creator = CREATOR.ljust(32, b"\0") + struct.pack("<HH", 0, 1)
    out += _block(b"CRTR", creator)
    z80r = Z80R_REGS.pack(
        regs.af & 0xFFFF, regs.bc & 0xFFFF, regs.de & 0xFFFF, regs.hl & 0xFFFF,
        regs.af_ & 0xFFFF, regs.bc_ & 0xFFFF, regs.de_ & 0xFFFF, regs.hl_ & 0xFFFF,
        regs.ix & 0xFFFF, regs.iy & 0xFFFF, regs.sp & 0xFFFF, regs.pc & 0xFFFF,
        regs.i & 0xFF, regs.r & 0xFF, int(regs.iff1), int(regs.iff2), regs.im & 3,
    )  # fmt: skip
    # dwCyclesStart, chHoldIntReqCycles, chFlags, wMemPtr.
    z80r += struct.pack("<IBBH", snapshot.tstates & 0xFFFFFFFF, 0, 0, 0)
    out += _block(b"Z80R", z80r)
    port_7ffd = snapshot.port_7ffd & 0xFF if snapshot.model == "128k" else 0
    border = snapshot.border & 7
    out += _block(b"SPCR", SPCR.pack(border, port_7ffd, 0, border))
    for page in sorted(snapshot.ram_pages):
        data = snapshot.ram_pages[page]
        packed = zlib.compress(data, 9) if compress else data
        if compress and len(packed) < len(data):
            out += _block(b"RAMP", RAMP_HEADER.pack(RAMP_COMPRESSED, page) + packed)
        else:
            out += _block(b"RAMP", RAMP_HEADER.pack(0, page) + data)
    return bytes(out)


def _block(block_id: bytes, body: bytes) -> bytes:
    return BLOCK.pack(block_id, len(body)) + body
