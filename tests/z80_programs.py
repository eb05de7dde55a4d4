"""Tiny hand-assembled Z80 programs that exercise the emulator in tests."""

from __future__ import annotations

from oakemu_rl.emulator import Registers, Snapshot

PROGRAM_ADDRESS = 0x8000
RESULTS = 0x9000


def snapshot_48k(program: bytes, *, sp: int = 0xFF00, pc: int = PROGRAM_ADDRESS) -> Snapshot:
    memory = bytearray(0xC000)
    offset = PROGRAM_ADDRESS - 0x4000
    memory[offset : offset + len(program)] = program
    return Snapshot.from_48k_memory(bytes(memory), Registers(pc=pc, sp=sp, im=1))


def port_reader() -> bytes:
    """Read all eight keyboard half-rows into RESULTS+0..7 and Kempston into RESULTS+8, forever."""
    program = [0xF3]  # DI
    for n, high in enumerate((0xFE, 0xFD, 0xFB, 0xF7, 0xEF, 0xDF, 0xBF, 0x7F)):
        # LD BC,0x<high>FE ; IN A,(C) ; LD (RESULTS+n),A
        program += [0x01, 0xFE, high, 0xED, 0x78, 0x32, n, RESULTS >> 8]
    # XOR A ; IN A,(0x1F) ; LD (RESULTS+8),A ; JP 0x8001
    program += [0xAF, 0xDB, 0x1F, 0x32, 8, RESULTS >> 8, 0xC3, 0x01, 0x80]
    return bytes(program)


def counter_with_routine() -> bytes:
    """EI; HALT-synchronised loop: each frame increments (RESULTS) and CALLs a routine at 0x8100.

    Every 4th frame it also CALLs a 'rare' routine at 0x8110 and advances a
    16-bit xorshift-style LFSR seeded from RESULTS+2 that draws a pixel row.
    """
    loop = [
        0xFB,  # 8000 EI
        0x76,  # 8001 HALT
        0x21, RESULTS & 0xFF, RESULTS >> 8,  # 8002 LD HL,RESULTS
        0x34,  # 8005 INC (HL)
        0xCD, 0x00, 0x81,  # 8006 CALL 0x8100
        0x7E,  # 8009 LD A,(HL)
        0xE6, 0x03,  # 800A AND 3
        0xCC, 0x10, 0x81,  # 800C CALL Z,0x8110
        0x18, 0xF0,  # 800F JR 0x8001
    ]  # fmt: skip
    program = bytearray(0x120)
    program[: len(loop)] = bytes(loop)
    program[0x100] = 0xC9  # 8100 RET
    rare = [
        0x2A, (RESULTS + 2) & 0xFF, RESULTS >> 8,  # LD HL,(RESULTS+2)
        0x29,  # ADD HL,HL
        0x30, 0x04,  # JR NC,+4
        0x7C, 0xEE, 0x2D, 0x67,  # LD A,H; XOR 0x2D; LD H,A
        0x22, (RESULTS + 2) & 0xFF, RESULTS >> 8,  # LD (RESULTS+2),HL
        0x7D,  # LD A,L
        0x32, 0x00, 0x40,  # LD (0x4000),A  (top-left screen byte)
        0xC9,  # RET
    ]  # fmt: skip
    program[0x110 : 0x110 + len(rare)] = bytes(rare)
    return bytes(program)
