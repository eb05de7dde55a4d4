"""Errors a user can cause, reported as one clear line instead of a traceback."""

from __future__ import annotations

from ..emulator.errors import EmulatorError
from ..games.errors import GameDefinitionError, StartProcedureError
from ..trajectories.trajectory_file import TrajectoryFileError


class UsageError(Exception):
    """A bad command-line value."""


USER_ERRORS: tuple[type[BaseException], ...] = (
    UsageError,
    GameDefinitionError,
    StartProcedureError,
    EmulatorError,
    FileNotFoundError,
    NotImplementedError,
    TrajectoryFileError,
)
