"""Argument types shared by the commands: whole numbers and addresses, with a clear error."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0 and finite, got {text}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def ray_address(text: str) -> str:
    """'auto', or HOST:PORT of a Ray head node."""
    from ..envs.backends import check_ray_address

    try:
        return check_ray_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
