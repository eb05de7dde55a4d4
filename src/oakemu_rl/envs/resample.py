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
    """Downscale (h, w) or (h, w, c) uint8 images to (out_h, out_w[, c]).

    Sums run in integers along each axis (`numpy.add.reduceat` over each bin's run of
    source pixels): exact, and no BLAS call, so env workers never start BLAS threads.
    """

    def __init__(self, in_h: int, in_w: int, out_h: int, out_w: int) -> None:
        if out_h > in_h or out_w > in_w:
            raise ValueError(f"cannot upscale {in_h}x{in_w} to {out_h}x{out_w}")
        rows, cols = area_bins(in_h, out_h), area_bins(in_w, out_w)
        self._row_starts = np.searchsorted(rows, np.arange(out_h))
        self._col_starts = np.searchsorted(cols, np.arange(out_w))
        counts = np.outer(np.bincount(rows, minlength=out_h), np.bincount(cols, minlength=out_w))
        self._counts = counts.astype(np.uint32)

    def __call__(self, image: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        sums = np.add.reduceat(image, self._row_starts, axis=0, dtype=np.uint32)
        sums = np.add.reduceat(sums, self._col_starts, axis=1)
        n = self._counts if image.ndim == 2 else self._counts[..., None]
        return ((2 * sums + n) // (2 * n)).astype(np.uint8)
