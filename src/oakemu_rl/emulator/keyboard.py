"""Spectrum keyboard and Kempston joystick: key names and port decoding.

The 40 keys sit in eight half-rows of five. Reading port 0xFE with a zero in
address line A8+n selects half-row n; a pressed key pulls its data bit low.
The Kempston joystick answers port 0x1F with active-high bits.
"""

from __future__ import annotations

from collections.abc import Iterable

HALF_ROWS: tuple[tuple[str, ...], ...] = (
    ("CAPS_SHIFT", "Z", "X", "C", "V"),  # A8  (0xFEFE)
    ("A", "S", "D", "F", "G"),  # A9  (0xFDFE)
    ("Q", "W", "E", "R", "T"),  # A10 (0xFBFE)
    ("1", "2", "3", "4", "5"),  # A11 (0xF7FE)
    ("0", "9", "8", "7", "6"),  # A12 (0xEFFE)
    ("P", "O", "I", "U", "Y"),  # A13 (0xDFFE)
    ("ENTER", "L", "K", "J", "H"),  # A14 (0xBFFE)
    ("SPACE", "SYMBOL_SHIFT", "M", "N", "B"),  # A15 (0x7FFE)
)

KEYBOARD_KEYS: dict[str, tuple[int, int]] = {
    name: (row, bit) for row, names in enumerate(HALF_ROWS) for bit, name in enumerate(names)
}

KEMPSTON_BITS: dict[str, int] = {
    "KEMPSTON_RIGHT": 0x01,
    "KEMPSTON_LEFT": 0x02,
    "KEMPSTON_DOWN": 0x04,
    "KEMPSTON_UP": 0x08,
    "KEMPSTON_FIRE": 0x10,
}

ALIASES: dict[str, str] = {
    "CS": "CAPS_SHIFT",
    "CAPS": "CAPS_SHIFT",
    "SHIFT": "CAPS_SHIFT",
    "SS": "SYMBOL_SHIFT",
    "SYMSHIFT": "SYMBOL_SHIFT",
    "SYM": "SYMBOL_SHIFT",
    "RETURN": "ENTER",
    "ENT": "ENTER",
    "SPC": "SPACE",
    "BREAK": "SPACE",
}

ALL_KEYS: tuple[str, ...] = (*KEYBOARD_KEYS, *KEMPSTON_BITS)


class UnknownKeyError(ValueError):
    """A key name that is neither a Spectrum key, a Kempston direction nor an alias."""


def canonical_key(name: str | int) -> str:
    """Return the canonical name of a key, accepting aliases and any case.

    Raises UnknownKeyError with the list of valid names when the key is unknown.
    """
    text = str(name).strip().upper().replace("-", "_").replace(" ", "_")
    text = ALIASES.get(text, text)
    if text in KEYBOARD_KEYS or text in KEMPSTON_BITS:
        return text
    raise UnknownKeyError(
        f"unknown key name {name!r}; expected one of {', '.join(ALL_KEYS)} "
        f"(aliases: {', '.join(ALIASES)})"
    )


class InputState:
    """Held keys and joystick directions, answered through a precomputed port table.

    `read_port` is installed as the emulator's input callback; it does two
    table look-ups and never dispatches through device objects.
    """

    def __init__(self) -> None:
        self._held: frozenset[str] = frozenset()
        self._ula_table = [0xBF] * 256
        self._kempston = 0
        # Port tables by key set: an action set is small, so each is built once.
        self._tables: dict[frozenset[str], tuple[frozenset[str], list[int], int]] = {}

    @property
    def held(self) -> frozenset[str]:
        return self._held

    def set_held(self, keys: Iterable[str]) -> None:
        held = keys if isinstance(keys, frozenset) else frozenset(keys)
        if held == self._held:
            return
        tables = self._tables.get(held)
        if tables is None:
            canonical = frozenset(canonical_key(k) for k in held)
            tables = self._tables[held] = self._build_tables(canonical)
        self._held, self._ula_table, self._kempston = tables

    @staticmethod
    def _build_tables(held: frozenset[str]) -> tuple[frozenset[str], list[int], int]:
        rows = [0] * 8
        kempston = 0
        for key in held:
            if key in KEMPSTON_BITS:
                kempston |= KEMPSTON_BITS[key]
            else:
                row, bit = KEYBOARD_KEYS[key]
                rows[row] |= 1 << bit
        table = []
        for high in range(256):
            pressed = 0
            for row in range(8):
                if not high & (1 << row):
                    pressed |= rows[row]
            table.append(0xBF & ~pressed)
        return held, table, kempston

    def read_port(self, address: int) -> int:
        if not address & 1:
            return self._ula_table[address >> 8]
        if address & 0xFF == 0x1F:
            return self._kempston
        return 0xFF
