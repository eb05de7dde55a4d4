"""What the distill tests share: a run that neither logs nor prints."""

from __future__ import annotations

QUIET = {"tensorboard": False, "console": False}
"""The `logging` section of a run that writes no TensorBoard events and no console."""


def no_print(_: str) -> None:
    """A `print_fn` that drops what a run would print."""
