"""Errors raised by the emulator layer."""

from __future__ import annotations


class EmulatorError(Exception):
    """A problem with the emulated machine or its input."""


class SnapshotError(EmulatorError):
    """A snapshot file is missing, unknown, corrupt or truncated.

    The message always names the file and what is wrong with it.
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnsupportedMachineError(EmulatorError):
    """The requested machine model is not supported."""
