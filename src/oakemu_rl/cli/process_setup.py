"""How the `oakemu-rl` program sets up its own process for training.

This is the program's choice for the process it owns; the library (`Experiment` and
below) changes no process-wide setting, so a Python user's process stays as they set it.
A Python user who wants the same can call `keep_freed_memory()` at the top of a script.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Have glibc keep freed heap memory for reuse instead of giving it back to the kernel.

    Every learner update allocates the same batch-sized tensors (activations, gradients),
    hundreds of KiB each. By default glibc serves the larger ones with fresh mappings and
    returns freed memory, so each update page-faults them in again (hundreds of faults,
    about a fifth of a DQN update on a 2-core machine). Fixed thresholds (mmap above
    32 MiB, trim above 256 MiB) keep that memory in the heap. Returns whether they were
    set (glibc on Linux only); calling it again changes nothing.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(
        mallopt(_M_TRIM_THRESHOLD, 256 << 20)
    )
