"""Decode the Spectrum display file into colour indices with numpy."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

SCREEN_HEIGHT = 192
SCREEN_WIDTH = 256
BITMAP_SIZE = 6144
ATTRIBUTES_SIZE = 768

# Display-file offset of each pixel row: y = 64*third + 8*char_row + pixel_line.
_ROW_OFFSETS = np.array(
    [((y & 0xC0) << 5) | ((y & 0x07) << 8) | ((y & 0x38) << 2) for y in range(SCREEN_HEIGHT)],
    dtype=np.intp,
)

# The usual RGB palette: indices 0-7 normal, 8-15 bright.
PALETTE = np.array(
    [
        (0, 0, 0), (0, 0, 215), (215, 0, 0), (215, 0, 215),
        (0, 215, 0), (0, 215, 215), (215, 215, 0), (215, 215, 215),
        (0, 0, 0), (0, 0, 255), (255, 0, 0), (255, 0, 255),
        (0, 255, 0), (0, 255, 255), (255, 255, 0), (255, 255, 255),
    ],
    dtype=np.uint8,
)  # fmt: skip


_BITMAP_INDEX = (_ROW_OFFSETS.reshape(-1, 1) + np.arange(32)).ravel()
_INDEX_LUT = np.arange(16, dtype=np.uint8)


def _cell_colours(
    attrs: npt.NDArray[np.uint8], flash_phase: bool
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    bright = (attrs & 0x40) >> 3
    ink = (attrs & 0x07) | bright
    paper = ((attrs >> 3) & 0x07) | bright
    if flash_phase:
        flashing = (attrs & 0x80).astype(bool)
        ink, paper = np.where(flashing, paper, ink), np.where(flashing, ink, paper)
    return ink.astype(np.uint8, copy=False), paper.astype(np.uint8, copy=False)


def render_screen(
    display: npt.NDArray[np.uint8],
    flash_phase: bool,
    lut: npt.NDArray[np.uint8] = _INDEX_LUT,
    rows: slice = slice(0, SCREEN_HEIGHT),
) -> npt.NDArray[np.uint8]:
    """Render pixel rows `rows` of the display through `lut` (colour index -> value).

    The look-up is applied per 8x8 cell, not per pixel, and the bitmap is
    expanded by broadcasting: this is the hot path of every screen observation.
    With a (16,) LUT the result is (rows, 256); with a (16, 3) LUT, (rows, 256, 3).
    """
    top, bottom = rows.start or 0, rows.stop if rows.stop is not None else SCREEN_HEIGHT
    cell_top, cell_bottom = top // 8, (bottom + 7) // 8
    index = _BITMAP_INDEX[cell_top * 256 : cell_bottom * 256]
    bits = np.unpackbits(display.take(index).reshape(-1, 32), axis=1).astype(bool)
    cells = cell_bottom - cell_top
    attrs = display[BITMAP_SIZE + 32 * cell_top : BITMAP_SIZE + 32 * cell_bottom].reshape(cells, 32)
    ink, paper = _cell_colours(attrs, flash_phase)
    extra = lut.shape[1:]
    ink_values = lut[ink].reshape(cells, 1, 32, 1, *extra)
    paper_values = lut[paper].reshape(cells, 1, 32, 1, *extra)
    bits = bits.reshape(cells, 8, 32, 8, *(1 for _ in extra))
    pixels = np.where(bits, ink_values, paper_values).reshape(cells * 8, 256, *extra)
    return pixels[top - 8 * cell_top : bottom - 8 * cell_top]


def decode_screen(display: npt.NDArray[np.uint8], flash_phase: bool) -> npt.NDArray[np.uint8]:
    """Turn 6912 bytes of display memory into a (192, 256) array of colour indices 0-15.

    `flash_phase` swaps ink and paper of FLASH cells, as the ULA does every 16 frames.
    """
    return render_screen(display, flash_phase)


def decode_attributes(display: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """The raw 24x32 attribute grid."""
    return display[BITMAP_SIZE : BITMAP_SIZE + ATTRIBUTES_SIZE].reshape(24, 32).copy()


def to_rgb(indices: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Colour indices to an RGB image."""
    return PALETTE[indices]
