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


def decode_screen(display: npt.NDArray[np.uint8], flash_phase: bool) -> npt.NDArray[np.uint8]:
    """Turn 6912 bytes of display memory into a (192, 256) array of colour indices 0-15.

    `flash_phase` swaps ink and paper of FLASH cells, as the ULA does every 16 frames.
    """
    bitmap = display[:BITMAP_SIZE][_ROW_OFFSETS.reshape(-1, 1) + np.arange(32)]
    pixels = np.unpackbits(bitmap, axis=1).astype(bool)  # (192, 256)
    attrs = display[BITMAP_SIZE : BITMAP_SIZE + ATTRIBUTES_SIZE].reshape(24, 32)
    ink = (attrs & 0x07) | ((attrs & 0x40) >> 3)
    paper = ((attrs >> 3) & 0x07) | ((attrs & 0x40) >> 3)
    if flash_phase:
        flashing = (attrs & 0x80).astype(bool)
        ink, paper = np.where(flashing, paper, ink), np.where(flashing, ink, paper)
    ink_px = np.repeat(np.repeat(ink, 8, axis=0), 8, axis=1)
    paper_px = np.repeat(np.repeat(paper, 8, axis=0), 8, axis=1)
    return np.where(pixels, ink_px, paper_px).astype(np.uint8)


def decode_attributes(display: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """The raw 24x32 attribute grid."""
    return display[BITMAP_SIZE : BITMAP_SIZE + ATTRIBUTES_SIZE].reshape(24, 32).copy()


def to_rgb(indices: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Colour indices to an RGB image."""
    return PALETTE[indices]
