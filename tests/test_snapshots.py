"""Tests for the snapshot readers and writers: .z80 (v1-v3), .sna and .szx."""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from oakemu_rl.emulator.errors import SnapshotError
from oakemu_rl.emulator.snapshots import (
    PAGE_SIZE,
    Registers,
    Snapshot,
    load_snapshot,
    read_sna,
    read_szx,
    read_z80,
    save_snapshot,
    write_sna,
    write_szx,
    write_z80,
)
from oakemu_rl.emulator.snapshots.z80 import rle_decode, rle_encode

# -- helpers ------------------------------------------------------------------


def random_registers(rng: np.random.Generator) -> Registers:
    word = lambda: int(rng.integers(0, 0x10000))  # noqa: E731
    return Registers(
        af=word(), bc=word(), de=word(), hl=word(), af_=word(), bc_=word(), de_=word(),
        hl_=word(), ix=word(), iy=word(), sp=0xF000, pc=int(rng.integers(1, 0x10000)),
        i=int(rng.integers(0, 256)), r=int(rng.integers(128, 256)),  # R bit 7 set
        iff1=True, iff2=False, im=int(rng.integers(0, 3)),
    )  # fmt: skip


def random_page(rng: np.random.Generator) -> bytes:
    """Random bytes with runs and ED bytes mixed in, so RLE has work to do."""
    page = rng.integers(0, 256, PAGE_SIZE, dtype=np.uint8)
    page[100:400] = 0  # a long run
    page[500:507] = 0xED  # a run of ED
    page[600] = 0xED  # a single ED followed by a run
    page[601:611] = 7
    page[rng.integers(0, PAGE_SIZE, 500)] = 0xED
    return page.tobytes()


def make_snapshot(model: str, seed: int = 0, port_7ffd: int = 0x13) -> Snapshot:
    rng = np.random.default_rng(seed)
    pages = (5, 2, 0) if model == "48k" else range(8)
    return Snapshot(
        model,  # type: ignore[arg-type]
        random_registers(rng),
        {page: random_page(rng) for page in pages},
        border=int(rng.integers(0, 8)),
        port_7ffd=port_7ffd if model == "128k" else 0,
        tstates=int(rng.integers(0, 69888)),
    )


def assert_same(got: Snapshot, want: Snapshot, *, tstates: bool = True) -> None:
    assert got.model == want.model
    assert got.registers == want.registers
    assert got.ram_pages.keys() == want.ram_pages.keys()
    for page in want.ram_pages:
        assert got.ram_pages[page] == want.ram_pages[page], f"page {page} differs"
    assert got.border == want.border
    assert got.port_7ffd == want.port_7ffd
    if tstates:
        assert got.tstates == want.tstates


def z80_header(
    *,
    af: int = 0x1234,
    bc: int = 0x2345,
    hl: int = 0x3456,
    pc: int = 0x8000,
    sp: int = 0xFF00,
    i: int = 0x3F,
    r: int = 0x81,
    flags: int | None = None,
    de: int = 0x4567,
    bc_: int = 0x5678,
    de_: int = 0x6789,
    hl_: int = 0x789A,
    af_: int = 0x89AB,
    iy: int = 0x5C3A,
    ix: int = 0x9ABC,
    iff1: int = 1,
    iff2: int = 0,
    flags2: int = 2,
    border: int = 4,
    compressed: bool = False,
) -> bytes:
    """The 30-byte header every .z80 version starts with, packed field by field."""
    if flags is None:
        flags = (r >> 7) | (border << 1) | (0x20 if compressed else 0)
    return (
        bytes((af >> 8, af & 0xFF)) + struct.pack("<HHHH", bc, hl, pc, sp)
        + bytes((i, r & 0x7F, flags)) + struct.pack("<HHHH", de, bc_, de_, hl_)
        + bytes((af_ >> 8, af_ & 0xFF)) + struct.pack("<HH", iy, ix)
        + bytes((iff1, iff2, flags2))
    )  # fmt: skip


def z80_extra(length: int, pc: int, hardware: int, port_7ffd: int = 0, flags3: int = 0) -> bytes:
    body = struct.pack("<HHBBBB", length, pc, hardware, port_7ffd, 0, flags3)
    return body + bytes(2 + length - len(body))


def fill_block(number: int, value: int) -> bytes:
    """A memory block of 16 KiB of one byte, compressed by hand: 64 runs of 255 and one of 64."""
    body = bytes((0xED, 0xED, 255, value)) * 64 + bytes((0xED, 0xED, 64, value))
    return struct.pack("<HB", len(body), number) + body


def raw_block(number: int, data: bytes) -> bytes:
    return struct.pack("<HB", 0xFFFF, number) + data


def szx_block(block_id: bytes, body: bytes) -> bytes:
    return block_id + struct.pack("<I", len(body)) + body


def szx_file(
    machine: int = 1, blocks: list[bytes] | None = None, version: tuple[int, int] = (1, 4)
) -> bytes:
    return b"ZXST" + bytes((*version, machine, 0)) + b"".join(blocks or [])


def szx_z80r(im: int = 1, size: int = 37) -> bytes:
    body = struct.pack("<12HBBBBB", *range(1, 13), 0x3F, 0x85, 1, 1, im)
    body += struct.pack("<IBBH", 1234, 0, 0, 0)
    return szx_block(b"Z80R", body[:size])


def szx_ramp(page: int, data: bytes, compressed: bool = True) -> bytes:
    if compressed:
        return szx_block(b"RAMP", struct.pack("<HB", 1, page) + zlib.compress(data))
    return szx_block(b"RAMP", struct.pack("<HB", 0, page) + data)


def szx_48k(extra_blocks: list[bytes] | None = None, pages: tuple[int, ...] = (0, 2, 5)) -> bytes:
    blocks = [szx_z80r(), szx_block(b"SPCR", bytes((3, 0, 0, 3, 0, 0, 0, 0)))]
    blocks += [szx_ramp(page, bytes((page,)) * PAGE_SIZE) for page in pages]
    return szx_file(1, blocks + (extra_blocks or []))


# -- RLE ----------------------------------------------------------------------

ED = 0xED


@pytest.mark.parametrize(
    ("data", "encoded"),
    [
        (b"", b""),
        (b"abcd", b"abcd"),
        (b"aaaa", b"aaaa"),  # 4 of a kind: shorter as literals
        (b"aaaaa", bytes((ED, ED, 5)) + b"a"),
        (b"\xed", b"\xed"),
        (b"\xed\xed", bytes((ED, ED, 2, ED))),  # even 2 EDs are a run
        (b"\xed\x01\x02", b"\xed\x01\x02"),  # single ED then data: literal
        # The byte after a single ED is never the start of a run.
        (b"\xed" + b"\x00" * 6, b"\xed\x00" + bytes((ED, ED, 5, 0))),
        (b"\x00" * 255, bytes((ED, ED, 255, 0))),
        (b"\x00" * 256, bytes((ED, ED, 255, 0, 0))),
        (b"\x00" * 260, bytes((ED, ED, 255, 0, ED, ED, 5, 0))),
        (b"\xed" * 256, bytes((ED, ED, 255, ED, ED))),
        (b"\xed" * 256 + b"\x00", bytes((ED, ED, 255, ED, ED, 0))),
        (b"\xed" * 257, bytes((ED, ED, 255, ED, ED, ED, 2, ED))),
        (b"x" + b"\xed" * 3 + b"yyyyy", b"x" + bytes((ED, ED, 3, ED, ED, ED, 5)) + b"y"),
    ],
)
def test_rle_encoding(data: bytes, encoded: bytes) -> None:
    assert rle_encode(data) == encoded
    assert rle_decode(encoded, len(data)) == (data, len(encoded))


def test_rle_round_trip_of_awkward_data() -> None:
    rng = np.random.default_rng(7)
    # Few distinct values, many EDs: lots of runs of every length, single EDs everywhere.
    data = rng.choice(np.array([0, ED, 1], dtype=np.uint8), 20000, p=[0.45, 0.45, 0.1]).tobytes()
    encoded = rle_encode(data)
    assert rle_decode(encoded, len(data)) == (data, len(encoded))


def test_rle_decode_stops_at_the_wanted_size() -> None:
    # The v1 end marker 00 ED ED 00 follows the data; decoding stops before it.
    assert rle_decode(b"ab\x00\xed\xed\x00", 2) == (b"ab", 2)


# -- round trips ----------------------------------------------------------------

Writer = Callable[[Snapshot], bytes]
Reader = Callable[[bytes, str], Snapshot]

FORMATS: dict[str, tuple[Writer, Reader, bool]] = {
    # name: (writer, reader, keeps T-states)
    "z80v1": (lambda s: write_z80(s, version=1), read_z80, False),
    "z80v1-raw": (lambda s: write_z80(s, version=1, compress=False), read_z80, False),
    "z80v2": (lambda s: write_z80(s, version=2), read_z80, False),
    "z80v3": (write_z80, read_z80, True),
    "z80v3-raw": (lambda s: write_z80(s, compress=False), read_z80, True),
    "sna": (write_sna, read_sna, False),
    "szx": (write_szx, read_szx, True),
    "szx-raw": (lambda s: write_szx(s, compress=False), read_szx, True),
}


def prepare_for(snapshot: Snapshot, fmt: str) -> Snapshot:
    """Adjust a snapshot to what a format can hold, so the round trip is exact."""
    if fmt.startswith("z80v1") or fmt.startswith("z80v2") or fmt == "sna":
        snapshot.tstates = 0
    if fmt == "sna":
        regs = snapshot.registers
        regs.iff2 = regs.iff1  # one IFF bit only
        if snapshot.model == "48k":  # PC is pushed on the stack: put it there already
            page = bytearray(snapshot.ram_pages[0])
            offset = regs.sp - 2 - 0xC000
            page[offset : offset + 2] = struct.pack("<H", regs.pc)
            snapshot.ram_pages[0] = bytes(page)
    return snapshot


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("seed", [0, 1])
def test_round_trip_48k(fmt: str, seed: int) -> None:
    writer, reader, _ = FORMATS[fmt]
    snapshot = prepare_for(make_snapshot("48k", seed), fmt)
    assert_same(reader(writer(snapshot), "game"), snapshot)


@pytest.mark.parametrize("fmt", [f for f in FORMATS if not f.startswith("z80v1")])
@pytest.mark.parametrize("port_7ffd", [0x00, 0x13, 0x15, 0x1A, 0x37])  # pages 0, 3, 5, 2, 7
def test_round_trip_128k(fmt: str, port_7ffd: int) -> None:
    writer, reader, _ = FORMATS[fmt]
    snapshot = prepare_for(make_snapshot("128k", port_7ffd, port_7ffd), fmt)
    assert_same(reader(writer(snapshot), "game"), snapshot)


@pytest.mark.parametrize("model", ["48k", "128k"])
@pytest.mark.parametrize("tstates", [0, 1, 17471, 17472, 17473, 35000, 52000, 69887])
def test_z80_v3_keeps_tstates(model: str, tstates: int) -> None:
    snapshot = make_snapshot(model)
    snapshot.tstates = tstates
    assert read_z80(write_z80(snapshot)).tstates == tstates


def test_z80_writers_reject_what_a_version_cannot_hold() -> None:
    with pytest.raises(ValueError, match="only 48K"):
        write_z80(make_snapshot("128k"), version=1)
    snapshot = make_snapshot("48k")
    snapshot.registers.pc = 0
    with pytest.raises(ValueError, match="PC = 0"):
        write_z80(snapshot, version=1)
    with pytest.raises(ValueError, match="uncompressed"):
        write_z80(snapshot, version=2, compress=False)
    with pytest.raises(ValueError, match="1, 2 or 3"):
        write_z80(snapshot, version=4)


def test_z80_v3_header_layout() -> None:
    snapshot = make_snapshot("128k", port_7ffd=0x17)
    data = write_z80(snapshot)
    assert data[6:8] == b"\0\0"  # PC = 0 marks v2/v3
    assert struct.unpack_from("<HHBB", data, 30) == (54, snapshot.registers.pc, 4, 0x17)
    assert data[12] & 1 == snapshot.registers.r >> 7
    assert (data[12] >> 1) & 7 == snapshot.border
    assert struct.unpack_from("<HB", data, 86)[1] == 3  # first block: RAM page 0


def test_z80_v3_stores_incompressible_pages_raw() -> None:
    snapshot = make_snapshot("48k")
    rng = np.random.default_rng(3)
    noise = rng.integers(0, 256, PAGE_SIZE, dtype=np.uint8)
    noise[noise == ED] = 0  # no EDs and (almost surely) no runs of 5: RLE saves nothing
    snapshot.ram_pages[2] = noise.tobytes()
    data = write_z80(snapshot)
    assert struct.pack("<HB", 0xFFFF, 4) in data
    assert_same(read_z80(data), snapshot)


# -- hand-built .z80 images -----------------------------------------------------


def check_header_registers(regs: Registers, pc: int = 0x8000) -> None:
    assert regs == Registers(
        af=0x1234, bc=0x2345, de=0x4567, hl=0x3456, af_=0x89AB, bc_=0x5678, de_=0x6789,
        hl_=0x789A, ix=0x9ABC, iy=0x5C3A, sp=0xFF00, pc=pc, i=0x3F, r=0x81, iff1=True,
        iff2=False, im=2,
    )  # fmt: skip


def test_read_hand_built_v1_uncompressed() -> None:
    memory = bytes(range(256)) * 192
    snapshot = read_z80(z80_header() + memory)
    check_header_registers(snapshot.registers)
    assert snapshot.model == "48k"
    assert snapshot.border == 4
    assert snapshot.memory_48k() == memory
    assert snapshot.ram_pages[5] == memory[:PAGE_SIZE]


def test_read_hand_built_v1_compressed_with_and_without_end_marker() -> None:
    body = bytes((ED, ED, 255, 0x42)) * 192 + bytes((ED, ED, 192, 0x42))  # 49152 bytes of 0x42
    for tail in (b"\x00\xed\xed\x00", b""):
        snapshot = read_z80(z80_header(compressed=True) + body + tail)
        assert snapshot.memory_48k() == b"\x42" * 3 * PAGE_SIZE


def test_read_v1_flags_byte_255_means_1() -> None:
    snapshot = read_z80(z80_header(r=0x01, flags=0xFF) + bytes(3 * PAGE_SIZE))
    assert snapshot.registers.r == 0x81
    assert snapshot.border == 0


@pytest.mark.parametrize("hardware", [0, 1, 12])
def test_read_hand_built_v2(hardware: int) -> None:
    if hardware == 12:  # +2: a 128K with another ROM
        blocks = b"".join(fill_block(page + 3, 0x10 + page) for page in range(8))
    else:
        blocks = fill_block(8, 0x55) + fill_block(4, 0x44) + raw_block(5, bytes(PAGE_SIZE))
    data = z80_header(pc=0) + z80_extra(23, 0x6000, hardware, 0x14) + blocks
    snapshot = read_z80(data)
    check_header_registers(snapshot.registers, pc=0x6000)
    if hardware == 12:
        assert snapshot.model == "128k"
        assert snapshot.port_7ffd == 0x14
        assert all(snapshot.ram_pages[p] == bytes((0x10 + p,)) * PAGE_SIZE for p in range(8))
    else:
        assert snapshot.model == "48k"
        assert snapshot.port_7ffd == 0
        assert snapshot.ram_pages[5] == b"\x55" * PAGE_SIZE
        assert snapshot.ram_pages[2] == b"\x44" * PAGE_SIZE
        assert snapshot.ram_pages[0] == bytes(PAGE_SIZE)


@pytest.mark.parametrize(("version_length", "hardware"), [(23, 3), (23, 4), (54, 4), (55, 6)])
def test_read_hand_built_128k(version_length: int, hardware: int) -> None:
    blocks = b"".join(fill_block(page + 3, page) for page in (7, 6, 5, 4, 3, 2, 1, 0))
    data = z80_header(pc=0) + z80_extra(version_length, 0x1234, hardware, 0x11) + blocks
    snapshot = read_z80(data)
    assert snapshot.model == "128k"
    assert snapshot.port_7ffd == 0x11
    assert snapshot.registers.pc == 0x1234
    assert all(snapshot.ram_pages[page] == bytes((page,)) * PAGE_SIZE for page in range(8))


# -- .z80 errors ----------------------------------------------------------------

V3_48K = z80_header(pc=0) + z80_extra(54, 0x8000, 0)
BLOCKS_48K = fill_block(8, 1) + fill_block(4, 2) + fill_block(5, 3)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "header is truncated"),
        (z80_header()[:29], "header is truncated"),
        (z80_header(pc=0), "truncated before the additional header length"),
        (z80_header(pc=0) + z80_extra(54, 0, 0)[:40], "v3 header is truncated"),
        (z80_header(pc=0) + z80_extra(40, 0, 0), "unknown Z80 version.*length 40"),
        (z80_header(flags2=3) + bytes(3 * PAGE_SIZE), "interrupt mode 3"),
        (z80_header() + bytes(3 * PAGE_SIZE - 1), "v1 memory is truncated"),
        (z80_header(compressed=True) + b"\xed\xed\xff\x00" * 10, "v1 compressed.*ends after"),
        (
            z80_header(compressed=True) + b"\xed\xed\xff\x00" * 192 + b"\xed\xed\xc0\x00\x01",
            "unexpected bytes after",
        ),
        (V3_48K + BLOCKS_48K[:2], "block header at offset 86 is truncated"),
        (V3_48K + BLOCKS_48K[:100], "block for page 8 is truncated"),
        (V3_48K + raw_block(8, bytes(100)), "block for page 8 is truncated"),
        (V3_48K + fill_block(3, 0) + BLOCKS_48K, "bad page number 3 for a 48K"),
        (V3_48K + BLOCKS_48K + fill_block(8, 0), "page 8 appears twice"),
        (V3_48K + BLOCKS_48K[: 2 * len(fill_block(0, 0))], r"missing.*page\(s\) \[5\]"),
        (
            V3_48K + struct.pack("<HB", 4, 8) + b"\xed\xed\x00\x00" + BLOCKS_48K,
            "page 8 is corrupt: a run of length 0",
        ),
        (
            V3_48K + struct.pack("<HB", 8, 8) + b"\xed\xed\xff\x00" * 2 + BLOCKS_48K,
            "page 8 is corrupt: data ends after 510 of 16384",
        ),
        (
            V3_48K + struct.pack("<HB", 3, 8) + b"\xed\xed\xff",
            "page 8 is corrupt: data ends inside a run",
        ),
        (
            V3_48K + fill_block(8, 0)[:-4] + b"\xed\xed\x41\x00" + BLOCKS_48K[263:],
            "page 8 is corrupt: a run of 65 bytes overshoots",
        ),
        (
            V3_48K + struct.pack("<HB", 261, 8) + fill_block(8, 0)[3:] + b"x" + BLOCKS_48K[263:],
            "page 8 is corrupt: 1 bytes left over",
        ),
    ],
)
def test_z80_errors(data: bytes, problem: str) -> None:
    with pytest.raises(SnapshotError, match=rf"^games/jetpac\.z80: .*{problem}"):
        read_z80(data, "games/jetpac.z80")


@pytest.mark.parametrize(
    ("length", "hardware", "flags3", "name"),
    [
        (23, 2, 0, "SamRam"),
        (54, 2, 0, "SamRam"),
        (23, 5, 0, "unknown"),  # 128K + IF1 only from v3 on
        (54, 7, 0, r"\+3"),
        (54, 9, 0, "Pentagon 128"),
        (54, 13, 0, r"\+2A"),
        (54, 77, 0, "unknown"),
        (54, 0, 0x80, "16K"),  # a 48K with the "modify hardware" bit
        (23, 0, 0x80, "16K"),
    ],
)
def test_z80_unsupported_hardware(length: int, hardware: int, flags3: int, name: str) -> None:
    data = z80_header(pc=0) + z80_extra(length, 0x8000, hardware, 0, flags3) + BLOCKS_48K
    with pytest.raises(
        SnapshotError,
        match=rf"^x\.z80: unsupported machine '{name}' .*mode {hardware}.*expected 48K or 128K",
    ):
        read_z80(data, "x.z80")


def test_z80_bad_128k_page() -> None:
    data = z80_header(pc=0) + z80_extra(54, 0x8000, 4) + fill_block(11, 0)
    with pytest.raises(SnapshotError, match=r"x\.z80: .*bad page number 11 for a 128K"):
        read_z80(data, "x.z80")


def test_z80_truncated_anywhere_is_a_snapshot_error() -> None:
    """Cutting a valid file at any point gives a SnapshotError, never a raw exception."""
    for version in (1, 2, 3):
        data = write_z80(make_snapshot("48k"), version=version)
        for cut in (*range(0, 100, 3), *range(100, len(data), 997)):
            with pytest.raises(SnapshotError, match=r"^cut\.z80: "):
                read_z80(data[:cut], "cut.z80")


# -- .szx -----------------------------------------------------------------------


def test_szx_layout() -> None:
    snapshot = make_snapshot("128k", port_7ffd=0x15)
    data = write_szx(snapshot)
    assert data[:8] == b"ZXST\x01\x04\x02\x00"
    blocks = []
    pos = 8
    while pos < len(data):
        block_id, size = struct.unpack_from("<4sI", data, pos)
        blocks.append((block_id, data[pos + 8 : pos + 8 + size]))
        pos += 8 + size
    assert pos == len(data)
    ids = [block_id for block_id, _ in blocks]
    assert ids[:3] == [b"CRTR", b"Z80R", b"SPCR"]
    assert ids[3:] == [b"RAMP"] * 8
    z80r = dict(blocks)[b"Z80R"]
    assert len(z80r) == 37
    assert struct.unpack_from("<H", z80r, 22)[0] == snapshot.registers.pc
    assert dict(blocks)[b"SPCR"][:2] == bytes((snapshot.border, 0x15))


def test_read_hand_built_szx() -> None:
    extra = [szx_block(b"KEYB", bytes(5)), szx_block(b"XXXX", b"unknown block")]
    snapshot = read_szx(szx_48k(extra))
    regs = snapshot.registers
    assert (regs.af, regs.bc, regs.de, regs.hl, regs.af_, regs.hl_) == (1, 2, 3, 4, 5, 8)
    assert (regs.ix, regs.iy, regs.sp, regs.pc, regs.i, regs.r) == (9, 10, 11, 12, 0x3F, 0x85)
    assert (regs.iff1, regs.iff2, regs.im) == (True, True, 1)
    assert snapshot.tstates == 1234
    assert snapshot.border == 3
    assert snapshot.ram_pages[2] == b"\x02" * PAGE_SIZE


def test_szx_tolerates_minor_versions_short_blocks_and_no_spcr() -> None:
    blocks = [szx_z80r(size=29)] + [szx_ramp(p, bytes(PAGE_SIZE), p == 2) for p in (5, 2, 0)]
    snapshot = read_szx(szx_file(1, blocks, version=(1, 2)))
    assert snapshot.tstates == 0
    assert snapshot.border == 7
    assert snapshot.registers.pc == 12


def test_szx_plus2_reads_as_128k() -> None:
    blocks = [szx_z80r(), szx_block(b"SPCR", bytes((1, 0x17, 0, 1, 0, 0, 0, 0)))]
    blocks += [szx_ramp(page, bytes(PAGE_SIZE)) for page in range(8)]
    snapshot = read_szx(szx_file(3, blocks))
    assert (snapshot.model, snapshot.port_7ffd) == ("128k", 0x17)


RAMP_0 = szx_ramp(0, bytes(PAGE_SIZE))
RAMP_0_CUT = szx_block(b"RAMP", b"\x01\x00\x00" + zlib.compress(bytes(PAGE_SIZE))[:-6])


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"ZXST\x01", "header is truncated"),
        (b"ZXSX\x01\x04\x01\x00", "not an SZX file: magic b'ZXSX'"),
        (b"RIFF" + bytes(100), "not an SZX file"),
        (szx_file(1, version=(2, 0)), r"unsupported SZX version 2\.0"),
        (szx_file(0), r"unsupported machine '16K' \(SZX machine id 0\); expected 48K or 128K"),
        (szx_file(5), r"unsupported machine '\+3'"),
        (szx_file(7), "unsupported machine 'Pentagon 128'"),
        (szx_file(99), "unsupported machine 'unknown'"),
        (szx_48k()[:-5], "block 'RAMP' at offset .* is truncated"),
        (szx_48k() + b"KEY", "block header at offset .* is truncated"),
        (szx_file(1, [szx_ramp(p, bytes(PAGE_SIZE)) for p in (0, 2, 5)]), "missing.*Z80R"),
        (szx_48k(pages=(0, 5)), r"missing the RAMP block\(s\) for page\(s\) \[2\]"),
        (szx_48k([szx_ramp(3, bytes(PAGE_SIZE))]), "bad page number 3 for a 48K"),
        (szx_48k([RAMP_0]), "page 0 appears twice"),
        (szx_48k([szx_block(b"RAMP", b"\x01\x00")]), "RAMP block is too short"),
        (
            szx_48k([szx_block(b"RAMP", b"\x01\x00\x00" + b"not zlib at all")], pages=(2, 5)),
            "page 0 has corrupt zlib data",
        ),
        (szx_48k([RAMP_0_CUT], pages=(2, 5)), "page 0 has truncated zlib data"),
        (
            szx_48k([szx_ramp(0, bytes(PAGE_SIZE + 1))], pages=(2, 5)),
            "page 0 holds 16385 bytes, expected 16384",
        ),
        (
            szx_48k([szx_ramp(0, bytes(100), compressed=False)], pages=(2, 5)),
            "page 0 holds 100 bytes",
        ),
        (szx_file(1, [szx_z80r(im=3)]), "interrupt mode 3"),
        (szx_file(1, [szx_z80r(size=20)]), "Z80R block is too short"),
        (szx_file(1, [szx_z80r(), szx_block(b"SPCR", b"\x01")]), "SPCR block is too short"),
    ],
)
def test_szx_errors(data: bytes, problem: str) -> None:
    with pytest.raises(SnapshotError, match=rf"^saves/level2\.szx: .*{problem}"):
        read_szx(data, "saves/level2.szx")


def test_szx_truncated_anywhere_is_a_snapshot_error() -> None:
    data = write_szx(make_snapshot("128k"))
    for cut in (*range(0, 200, 7), *range(200, len(data), 1009)):
        with pytest.raises(SnapshotError, match=r"^cut\.szx: "):
            read_szx(data[:cut], "cut.szx")


# -- .sna -----------------------------------------------------------------------


def test_sna_header_layout() -> None:
    snapshot = prepare_for(make_snapshot("48k"), "sna")
    data = write_sna(snapshot)
    assert len(data) == 27 + 3 * PAGE_SIZE
    regs = snapshot.registers
    assert struct.unpack_from("<H", data, 17)[0] == regs.ix
    assert struct.unpack_from("<H", data, 23)[0] == regs.sp - 2
    assert data[25:27] == bytes((regs.im, snapshot.border))


@pytest.mark.parametrize(
    ("size", "problem"),
    [(0, "truncated"), (100, "truncated"), (27 + 49152 + 1, "of an unexpected size")],
)
def test_sna_errors(size: int, problem: str) -> None:
    with pytest.raises(SnapshotError, match=rf"^a\.sna: SNA file is {problem}"):
        read_sna(bytes(size), "a.sna")


def test_sna_128k_with_paged_bank_5_needs_the_long_form() -> None:
    data = write_sna(prepare_for(make_snapshot("128k", port_7ffd=0x15), "sna"))
    assert len(data) == 27 + 4 + 9 * PAGE_SIZE
    with pytest.raises(SnapshotError, match=r"^a\.sna: 128K SNA file is truncated"):
        read_sna(data[: 27 + 4 + 8 * PAGE_SIZE], "a.sna")


def test_sna_48k_stack_outside_ram() -> None:
    data = bytearray(write_sna(prepare_for(make_snapshot("48k"), "sna")))
    data[23:25] = struct.pack("<H", 0x1000)
    with pytest.raises(SnapshotError, match=r"^a\.sna: SNA stack pointer 0x1000 is outside RAM"):
        read_sna(bytes(data), "a.sna")
    snapshot = make_snapshot("48k")
    snapshot.registers.sp = 0x4001
    with pytest.raises(ValueError, match="not in RAM"):
        write_sna(snapshot)


# -- files ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["game.z80", "game.sna", "game.szx", "GAME.Z80"])
@pytest.mark.parametrize("model", ["48k", "128k"])
def test_save_and_load_files(tmp_path: Path, name: str, model: str) -> None:
    fmt = {".z80": "z80v3", ".sna": "sna", ".szx": "szx"}[Path(name).suffix.lower()]
    snapshot = prepare_for(make_snapshot(model), fmt)
    path = tmp_path / name
    save_snapshot(snapshot, path)
    assert_same(load_snapshot(str(path)), snapshot)


def test_load_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.z80"
    with pytest.raises(SnapshotError, match=r"missing\.z80: file not found"):
        load_snapshot(missing)
    with pytest.raises(SnapshotError, match=r"game\.tap: unknown snapshot format '\.tap'"):
        load_snapshot(tmp_path / "game.tap")
    with pytest.raises(SnapshotError, match=r"game\.tzx: unknown snapshot format"):
        save_snapshot(make_snapshot("48k"), tmp_path / "game.tzx")
    empty = tmp_path / "empty.szx"
    empty.write_bytes(b"")
    with pytest.raises(SnapshotError, match=r"empty\.szx: file is empty"):
        load_snapshot(empty)
    folder = tmp_path / "folder.sna"
    folder.mkdir()
    with pytest.raises(SnapshotError, match=r"folder\.sna: is a directory"):
        load_snapshot(folder)
    corrupt = tmp_path / "corrupt.szx"
    corrupt.write_bytes(b"ZXST\x01\x04\x01\x00" + b"Z80R\xff\xff\xff\xff")
    with pytest.raises(
        SnapshotError, match=rf"{re.escape(str(corrupt))}: SZX block 'Z80R' .* truncated"
    ):
        load_snapshot(corrupt)
