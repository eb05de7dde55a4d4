"""Tape images (.tap, .tzx): parsing, loading through the 48K ROM and a cache of the result."""

from .cache import CACHE_DIR_NAME, cache_file, tape_snapshot
from .formats import TAPE_SUFFIXES, Tape, TapeBlock, TapeError, is_tape_path, read_tape
from .loader import TapeLoad, load_tape

__all__ = [
    "CACHE_DIR_NAME",
    "TAPE_SUFFIXES",
    "Tape",
    "TapeBlock",
    "TapeError",
    "TapeLoad",
    "cache_file",
    "is_tape_path",
    "load_tape",
    "read_tape",
    "tape_snapshot",
]
