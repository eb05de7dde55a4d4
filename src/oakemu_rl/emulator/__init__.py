"""The emulator layer: a headless ZX Spectrum, its snapshots, keyboard and screen."""

from .errors import EmulatorError, SnapshotError, UnsupportedMachineError
from .keyboard import ALL_KEYS, canonical_key
from .machine import ZXSpectrum
from .screen import PALETTE, decode_screen, to_rgb
from .snapshots import Registers, Snapshot, load_snapshot, save_snapshot

__all__ = [
    "ALL_KEYS",
    "PALETTE",
    "EmulatorError",
    "Registers",
    "Snapshot",
    "SnapshotError",
    "UnsupportedMachineError",
    "ZXSpectrum",
    "canonical_key",
    "decode_screen",
    "load_snapshot",
    "save_snapshot",
    "to_rgb",
]
