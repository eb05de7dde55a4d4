"""Reading text and numbers off the Spectrum screen by matching 8x8 glyphs in character cells.

Every one of the 24x32 character cells is compared, as its 8 pixel bytes and as their
inverse (so INK and PAPER may be either way round), with the glyphs of the known fonts:
the ROM character set (0x3D00 in the 48K ROM, characters 32-127) and any font found in
RAM (`find_fonts`). A cell whose INK and PAPER are the same colour shows nothing and
reads as a space; a cell that matches no glyph reads as `UNKNOWN`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import numpy.typing as npt

from ..emulator.machine import ZXSpectrum

__all__ = [
    "UNKNOWN",
    "Font",
    "ScreenLine",
    "ScreenNumber",
    "ScreenReader",
    "find_fonts",
    "read_numbers",
    "read_screen_text",
    "rom_font",
]

#: The character of a cell that shows something no known glyph matches.
UNKNOWN = "\N{REPLACEMENT CHARACTER}"

ROWS, COLUMNS = 24, 32
ROM_FONT_ADDRESS = 0x3D00
_CHARS_SYSVAR = 0x5C36  # CHARS: 256 bytes below the character set in use
_RAM_START = 0x5B00  # the first byte after the screen (fonts are not looked for in it)
_FULL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_MAX_LABEL_GAP = 3  # blank cells allowed between a label and its number
_NUMBER = re.compile(r"[0-9]+(?![A-Za-z])")
_NOT_A_LABEL_END = ",.;!?"


def _spectrum_char(code: int) -> str:
    """The character a Spectrum character code shows (the ROM's 94, 96 and 127 differ)."""
    return {0x5E: "↑", 0x60: "£", 0x7F: "©"}.get(code, chr(code))


# Display-file offset of line `l` of the cell at row `r`, column `c`: (24, 32, 8).
_r, _c, _l = np.meshgrid(np.arange(ROWS), np.arange(COLUMNS), np.arange(8), indexing="ij")
_CELL_INDEX: npt.NDArray[np.intp] = (((_r & 0x18) << 8) | (_l << 8) | ((_r & 7) << 5) | _c).astype(
    np.intp
)
del _r, _c, _l
_SHIFTS = np.arange(56, -8, -8, dtype=np.uint64)  # line 0 is the most significant byte


def _glyph_keys(glyphs: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """8-byte glyphs (..., 8) as one uint64 each, line 0 in the most significant byte."""
    keys: npt.NDArray[np.uint64] = np.bitwise_or.reduce(
        glyphs.astype(np.uint64) << _SHIFTS, axis=-1
    )
    return keys


def cell_keys(display: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """The 24x32 character cells of a display file (6912 or 6144 bytes) as uint64 bitmaps."""
    return _glyph_keys(np.asarray(display, dtype=np.uint8)[_CELL_INDEX])


def _hidden_cells(display: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    """Cells whose INK and PAPER are the same colour: they show no pixels."""
    attrs = np.asarray(display[6144:6912], dtype=np.uint8).reshape(ROWS, COLUMNS)
    return np.asarray((attrs & 0x07) == ((attrs >> 3) & 0x07))


@dataclass(frozen=True, eq=False)
class Font:
    """A character set: `glyphs[i]` draws character code `first_char + i`."""

    name: str
    address: int
    first_char: int
    glyphs: npt.NDArray[np.uint8] = field(repr=False)

    def __post_init__(self) -> None:
        glyphs = np.asarray(self.glyphs, dtype=np.uint8)
        if glyphs.ndim != 2 or glyphs.shape[1] != 8 or not len(glyphs):
            raise ValueError(f"font {self.name!r}: glyphs must be (n, 8) bytes; got {glyphs.shape}")
        object.__setattr__(self, "glyphs", glyphs)

    @property
    def chars(self) -> str:
        """The characters the glyphs draw, in order."""
        return "".join(_spectrum_char(self.first_char + i) for i in range(len(self.glyphs)))

    def __len__(self) -> int:
        return len(self.glyphs)


@cache
def rom_font() -> Font:
    """The 48K ROM's character set (codes 32-127 at 0x3D00)."""
    rom = np.frombuffer(ZXSpectrum("48k").read(ROM_FONT_ADDRESS, 96 * 8), dtype=np.uint8)
    return Font("ROM", ROM_FONT_ADDRESS, 32, rom.reshape(96, 8).copy())


@dataclass(frozen=True)
class ScreenLine:
    """One character row of the screen: 32 characters (blank cells are spaces)."""

    row: int
    text: str

    def __str__(self) -> str:
        return self.text.rstrip()


@dataclass(frozen=True)
class ScreenNumber:
    """A run of digits on the screen and the word just left of it on the same row."""

    value: int
    text: str
    row: int
    col: int
    label: str | None


class ScreenReader:
    """Reads screens with a fixed list of fonts (the first font's glyph wins a tie)."""

    def __init__(self, fonts: Sequence[Font]) -> None:
        self.fonts = tuple(fonts)
        table: dict[int, str] = {}
        for font in self.fonts:
            for key, char in zip(_glyph_keys(font.glyphs).tolist(), font.chars, strict=True):
                if key in (0, int(_FULL)):
                    continue  # blank and solid cells are spaces
                table.setdefault(key, char)
                table.setdefault(key ^ int(_FULL), char)
        keys = np.array(sorted(table), dtype=np.uint64)
        self._keys = keys
        self._chars = np.array([table[int(k)] for k in keys] + [UNKNOWN], dtype="<U1")

    def _lookup(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.intp]:
        """Each bitmap's index in the glyph table; `len(table)` where it is none of them."""
        size = len(self._keys)
        if not size:
            return np.zeros(keys.shape, dtype=np.intp)
        index = np.minimum(np.searchsorted(self._keys, keys), size - 1)
        return np.where(self._keys[index] == keys, index, size)

    def known(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
        """Whether each cell bitmap is a glyph (or inverse glyph) of these fonts, or blank."""
        return np.asarray((self._lookup(keys) < len(self._keys)) | (keys == 0) | (keys == _FULL))

    def characters(self, display: npt.NDArray[np.uint8]) -> npt.NDArray[np.str_]:
        """The (24, 32) characters shown by a display file."""
        keys = cell_keys(display)
        blank = (keys == 0) | (keys == _FULL) | _hidden_cells(display)
        return np.where(blank, " ", self._chars[self._lookup(keys)])

    def lines(self, display: npt.NDArray[np.uint8]) -> list[ScreenLine]:
        """All 24 rows of text, top to bottom."""
        chars = self.characters(display)
        return [ScreenLine(row, "".join(chars[row].tolist())) for row in range(ROWS)]

    def numbers(self, display: npt.NDArray[np.uint8]) -> list[ScreenNumber]:
        """Every number on the screen, top to bottom and left to right."""
        return _numbers(self.lines(display))

    def read_text(self, machine: ZXSpectrum) -> list[ScreenLine]:
        return self.lines(machine.display_memory())

    def read_numbers(self, machine: ZXSpectrum) -> list[ScreenNumber]:
        return self.numbers(machine.display_memory())


def _label_left_of(line: str, start: int) -> str | None:
    """The word just left of column `start` (at most a few blanks away), if it is a label."""
    left = line[:start]
    stripped = left.rstrip(" ")
    if not stripped or len(left) - len(stripped) > _MAX_LABEL_GAP:
        return None
    token = stripped.rsplit(" ", 1)[-1]
    if token[-1] in _NOT_A_LABEL_END:
        return None  # "3 LIVES, 8 SECTORS": the 8 is not the LIVES
    token = token.rstrip(":=")
    if UNKNOWN in token or not any(ch.isalpha() for ch in token):
        return None
    return token


def _numbers(lines: Sequence[ScreenLine]) -> list[ScreenNumber]:
    found: list[ScreenNumber] = []
    for line in lines:
        for match in _NUMBER.finditer(line.text):
            label = _label_left_of(line.text, match.start())
            found.append(
                ScreenNumber(int(match.group()), match.group(), line.row, match.start(), label)
            )
    return found


# -- fonts in RAM -----------------------------------------------------------------------


def _pixel_counts(glyphs: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
    return np.asarray(np.unpackbits(glyphs, axis=-1).sum(axis=-1), dtype=np.int64)


_PLUS = ((0, 1), (0, -1), (1, 0), (-1, 0))
#: Digits drawn with an enclosed hole (0 6 8 9) and without one (1 2 3 5 7) in nearly every font.
_HOLED, _OPEN = (0, 6, 8, 9), (1, 2, 3, 5, 7)


def _has_hole(glyphs: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    """Whether each glyph (n, 8) encloses paper that the border cannot reach (4-connected)."""
    ink = np.unpackbits(glyphs, axis=-1).reshape(-1, 8, 8).astype(bool)
    paper = np.pad(~ink, ((0, 0), (1, 1), (1, 1)), constant_values=True)
    reach = np.zeros_like(paper)
    reach[:, 0, :] = reach[:, -1, :] = reach[:, :, 0] = reach[:, :, -1] = True
    while True:
        grown = reach.copy()
        for dy, dx in _PLUS:
            grown |= np.roll(reach, (dy, dx), axis=(1, 2))
        grown &= paper
        if np.array_equal(grown, reach):
            return np.asarray((paper & ~reach).any(axis=(1, 2)))
        reach = grown


def _digit_like(glyphs: npt.NDArray[np.uint8]) -> bool:
    """Whether ten glyphs could be the digits 0-9 of one font, in order.

    Each is drawn (not blank, not solid) and different from the others; together they
    leave a blank row or column for spacing; 0, 6, 8 and 9 enclose a hole and 1, 2, 3, 5
    and 7 do not (one exception allowed); '1' is among the two lightest.
    """
    if glyphs.shape != (10, 8):
        return False
    counts = _pixel_counts(glyphs)
    if (counts == 0).any() or (counts == 64).any():
        return False
    if len({bytes(g) for g in glyphs}) < 10:
        return False
    union = np.bitwise_or.reduce(glyphs, axis=0)
    if (union != 0).all() and int(np.bitwise_or.reduce(union)) == 0xFF:
        return False
    holes = _has_hole(glyphs)
    exceptions = int((~holes[list(_HOLED)]).sum() + holes[list(_OPEN)].sum())
    return exceptions <= 1 and bool(counts[1] <= np.sort(counts)[1])


def _full_set_like(glyphs: npt.NDArray[np.uint8]) -> bool:
    """Whether 96 glyphs could be a character set for codes 32-127: a blank space, drawn and
    different letters A-Z, and digits that pass `_digit_like`."""
    if glyphs.shape != (96, 8) or glyphs[0].any():
        return False
    letters = glyphs[33:59]
    if (_pixel_counts(letters) == 0).any() or len({bytes(g) for g in letters}) < 26:
        return False
    return _digit_like(glyphs[16:26])


def _ram_image(machine: ZXSpectrum) -> npt.NDArray[np.uint8]:
    return np.frombuffer(machine.read(_RAM_START, 0x10000 - _RAM_START), dtype=np.uint8)


def _same_as_rom(font: Font) -> bool:
    rom = rom_font()
    start = font.first_char - rom.first_char
    if start < 0 or start + len(font) > len(rom):
        return False
    return bool(np.array_equal(rom.glyphs[start : start + len(font)], font.glyphs))


def _chars_font(machine: ZXSpectrum, ram: npt.NDArray[np.uint8]) -> Font | None:
    """The character set the CHARS system variable points at, if it is in RAM and looks like
    one."""
    chars = machine.read_byte(_CHARS_SYSVAR) | machine.read_byte(_CHARS_SYSVAR + 1) << 8
    start = chars + 256
    if start == ROM_FONT_ADDRESS or start < _RAM_START or start + 768 > 0x10000:
        return None
    glyphs = ram[start - _RAM_START : start - _RAM_START + 768].reshape(96, 8)
    if not _full_set_like(glyphs):
        return None
    return Font(f"RAM 0x{start:04X} (CHARS)", start, 32, glyphs.copy())


def _fonts_seen_on_screen(
    ram: npt.NDArray[np.uint8], unknown: npt.NDArray[np.uint64]
) -> list[Font]:
    """Digit runs (or whole character sets around them) in RAM whose glyphs the screen shows.

    `unknown` holds the bitmaps of the screen's cells that no known font draws.
    """
    if not len(unknown):
        return []
    targets = np.unique(np.concatenate([unknown, unknown ^ _FULL]))
    windows = np.lib.stride_tricks.sliding_window_view(ram, 8)
    hits = np.flatnonzero(np.isin(_glyph_keys(windows), targets))
    if not len(hits):
        return []
    # Every base whose digit slot d would hold a hit, with the digit slots that are hits.
    seen: dict[int, set[int]] = {}
    for offset in hits.tolist():
        for digit in range(10):
            base = offset - 8 * digit
            if base >= 0 and base + 80 <= len(ram):
                seen.setdefault(base, set()).add(digit)
    candidates = [
        base
        for base in sorted(seen, key=lambda b: (-len(seen[b]), b))
        if _digit_like(ram[base : base + 80].reshape(10, 8))
    ]
    # Whole character sets first (their blank space fixes where they start), then digits.
    found: list[tuple[int, int]] = []  # (start, glyphs)
    for base in candidates:
        full = base - 16 * 8
        if full < 0 or full + 768 > len(ram):
            continue
        if any(abs(full - start) < 8 * count for start, count in found):
            continue
        if _full_set_like(ram[full : full + 768].reshape(96, 8)):
            found.append((full, 96))
    for base in candidates:
        if not any(start - 80 < base < start + 8 * count for start, count in found):
            found.append((base, 10))
    fonts = []
    for start, count in found:
        glyphs = ram[start : start + 8 * count].reshape(count, 8).copy()
        address = _RAM_START + start
        fonts.append(Font(f"RAM 0x{address:04X}", address, 32 if count == 96 else 48, glyphs))
    return fonts


def find_fonts(machine: ZXSpectrum) -> list[Font]:
    """The fonts the screen may be drawn with: the ROM's first, then fonts found in RAM.

    RAM fonts are the character set the CHARS system variable points at (when it is in RAM
    and looks like one), and runs of ten glyphs that look like the digits 0-9, at least one
    of which the screen shows in a cell no other font draws; such a run becomes a whole
    96-character set when the glyphs around it look like one (a blank space 16 glyphs
    before the '0', drawn letters).
    """
    fonts = [rom_font()]
    ram = _ram_image(machine)
    chars = _chars_font(machine, ram)
    if chars is not None and not _same_as_rom(chars):
        fonts.append(chars)
    reader = ScreenReader(fonts)
    keys = cell_keys(machine.display_memory())
    visible = ~_hidden_cells(machine.display_memory())
    unknown = np.unique(keys[visible & ~reader.known(keys)])
    fonts.extend(f for f in _fonts_seen_on_screen(ram, unknown) if not _same_as_rom(f))
    return fonts


def read_screen_text(machine: ZXSpectrum, fonts: Sequence[Font] | None = None) -> list[ScreenLine]:
    """The screen as 24 lines of 32 characters (`fonts` default: `find_fonts(machine)`)."""
    reader = ScreenReader(find_fonts(machine) if fonts is None else fonts)
    return reader.read_text(machine)


def read_numbers(machine: ZXSpectrum, fonts: Sequence[Font] | None = None) -> list[ScreenNumber]:
    """Every number on the screen with the word left of it as its label (e.g. SCORE 00120).

    A label is the word ending at most three blank cells left of the digits, without a
    trailing ':' or '='; a word that ends in ',', '.', ';', '!' or '?' is no label.
    """
    return _numbers(read_screen_text(machine, fonts))
