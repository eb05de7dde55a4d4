"""Decoding of named memory variables (the `data:` section of a game)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

VariableType = Literal["byte", "signed_byte", "word", "word_be", "bcd", "number_string"]

VARIABLE_TYPES: tuple[str, ...] = ("byte", "signed_byte", "word", "word_be", "bcd", "number_string")
FIXED_SIZES: dict[str, int] = {"byte": 1, "signed_byte": 1, "word": 2, "word_be": 2}


def _signed_byte(raw: bytes) -> int:
    return raw[0] - 256 if raw[0] >= 128 else raw[0]


def _bcd(raw: bytes) -> int:
    value = 0
    for byte in raw:
        value = value * 100 + (byte >> 4) * 10 + (byte & 0x0F)
    return value


def _number_string(raw: bytes) -> int:
    value = 0
    for byte in raw:
        # Spaces (leading blanks) and any non-digit read as 0.
        digit = byte - 0x30
        value = value * 10 + (digit if 0 <= digit <= 9 else 0)
    return value


DECODERS: dict[str, Callable[[bytes], int]] = {
    "byte": lambda raw: raw[0],
    "signed_byte": _signed_byte,
    "word": lambda raw: raw[0] | (raw[1] << 8),
    "word_be": lambda raw: (raw[0] << 8) | raw[1],
    "bcd": _bcd,
    "number_string": _number_string,
}


def encode_value(kind: str, value: int, length: int) -> bytes:
    """Encode an integer in a variable's memory format (used by `start.randomize`)."""
    if kind in ("byte", "signed_byte"):
        return bytes([value & 0xFF])
    if kind == "word":
        return bytes([value & 0xFF, (value >> 8) & 0xFF])
    if kind == "word_be":
        return bytes([(value >> 8) & 0xFF, value & 0xFF])
    digits = str(value % (10 ** (length * (2 if kind == "bcd" else 1))))
    if kind == "bcd":
        digits = digits.zfill(2 * length)
        return bytes(int(digits[i]) << 4 | int(digits[i + 1]) for i in range(0, len(digits), 2))
    return digits.zfill(length).encode("ascii")


def value_range(kind: str, length: int) -> tuple[int, int]:
    """The smallest and largest value a variable can hold."""
    if kind == "signed_byte":
        return -128, 127
    if kind in FIXED_SIZES:
        return 0, (1 << (8 * FIXED_SIZES[kind])) - 1
    digits = length * (2 if kind == "bcd" else 1)
    return 0, 10**digits - 1
