"""The in-memory form of a machine snapshot, shared by every file format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

MachineModel = Literal["48k", "128k"]

PAGE_SIZE = 0x4000
# On a 48K machine, RAM pages 5, 2 and 0 sit at 0x4000, 0x8000 and 0xC000.
PAGES_48K: tuple[int, int, int] = (5, 2, 0)


@dataclass
class Registers:
    """Z80 registers. 16-bit pairs; `af_` etc. are the alternate set."""

    af: int = 0
    bc: int = 0
    de: int = 0
    hl: int = 0
    af_: int = 0
    bc_: int = 0
    de_: int = 0
    hl_: int = 0
    ix: int = 0
    iy: int = 0
    sp: int = 0
    pc: int = 0
    i: int = 0
    r: int = 0
    iff1: bool = False
    iff2: bool = False
    im: int = 1


@dataclass
class Snapshot:
    """A complete machine image: registers, RAM pages and a few latches.

    `ram_pages` maps page numbers to 16 KiB blocks: pages 5, 2 and 0 for a 48K
    machine (mapped at 0x4000, 0x8000, 0xC000); pages 0 to 7 for a 128K machine,
    whose port 0x7FFD value is `port_7ffd`.
    """

    model: MachineModel
    registers: Registers
    ram_pages: dict[int, bytes]
    border: int = 7
    port_7ffd: int = 0
    tstates: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        expected = set(PAGES_48K) if self.model == "48k" else set(range(8))
        if set(self.ram_pages) != expected:
            raise ValueError(
                f"a {self.model} snapshot needs RAM pages {sorted(expected)}, "
                f"got {sorted(self.ram_pages)}"
            )
        for page, block in self.ram_pages.items():
            if len(block) != PAGE_SIZE:
                raise ValueError(f"RAM page {page} has {len(block)} bytes, expected {PAGE_SIZE}")

    @classmethod
    def from_48k_memory(cls, memory: bytes, registers: Registers, border: int = 7) -> Snapshot:
        """Build a 48K snapshot from the 48 KiB of RAM seen at 0x4000-0xFFFF."""
        if len(memory) != 3 * PAGE_SIZE:
            raise ValueError(f"48K memory must be {3 * PAGE_SIZE} bytes, got {len(memory)}")
        pages = {
            page: bytes(memory[n * PAGE_SIZE : (n + 1) * PAGE_SIZE])
            for n, page in enumerate(PAGES_48K)
        }
        return cls("48k", registers, pages, border=border)

    def memory_48k(self) -> bytes:
        """The 48 KiB seen at 0x4000-0xFFFF with the current paging."""
        high = self.port_7ffd & 7 if self.model == "128k" else 0
        return self.ram_pages[5] + self.ram_pages[2] + self.ram_pages[high]
