"""Area resampling by pixel centres: the numpy reference of the C screen kernel.

Source pixel p of n_in belongs to output bin floor((p + 0.5) * n_out / n_in);
each output pixel is the mean of its bin, rounded half up. Sums are exact
integers, so this and `oakemu_rl._native.screen_kernel` agree bit for bit.
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np
import numpy.typing as npt

_kernel: ModuleType | None
try:
    from .._native import screen_kernel as _kernel
except ImportError:  # built without a C compiler
    _kernel = None

NATIVE_DISABLED = os.environ.get("OAKEMU_RL_NO_NATIVE", "") not in ("", "0")


def native_kernel() -> ModuleType | None:
    """The C kernel module, or None when it is not built or OAKEMU_RL_NO_NATIVE is set."""
    return None if NATIVE_DISABLED else _kernel


def area_bins(n_in: int, n_out: int) -> npt.NDArray[np.intp]:
    """The output bin of each source index."""
    p = np.arange(n_in)
    return ((2 * p + 1) * n_out) // (2 * n_in)


class AreaResampler:
    """Downscale (h, w) or (h, w, c) uint8 images to (out_h, out_w[, c])."""

    def __init__(self, in_h: int, in_w: int, out_h: int, out_w: int) -> None:
        if out_h > in_h or out_w > in_w:
            raise ValueError(f"cannot upscale {in_h}x{in_w} to {out_h}x{out_w}")
        rows, cols = area_bins(in_h, out_h), area_bins(in_w, out_w)
        self._rows = np.zeros((out_h, in_h), dtype=np.float32)
        self._rows[rows, np.arange(in_h)] = 1.0
        self._cols = np.zeros((in_w, out_w), dtype=np.float32)
        self._cols[np.arange(in_w), cols] = 1.0
        counts = np.outer(np.bincount(rows, minlength=out_h), np.bincount(cols, minlength=out_w))
        self._counts = counts.astype(np.int64)

    def __call__(self, image: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        pixels = image.astype(np.float32)
        if pixels.ndim == 2:
            sums = self._rows @ pixels @ self._cols
            n = self._counts
        else:
            sums = np.stack(
                [self._rows @ pixels[..., c] @ self._cols for c in range(pixels.shape[2])], axis=-1
            )
            n = self._counts[..., None]
        exact = np.rint(sums).astype(np.int64)
        return ((2 * exact + n) // (2 * n)).astype(np.uint8)
