"""Errors for game definitions."""

from __future__ import annotations

from pathlib import Path


class GameDefinitionError(ValueError):
    """A game YAML is wrong. The message names the file, the field and what was expected."""

    def __init__(self, path: str | Path, field: str, problem: str) -> None:
        self.path = str(path)
        self.field = field
        self.problem = problem
        where = f"{self.path}: {field}" if field else self.path
        super().__init__(f"{where}: {problem}")


class StartProcedureError(RuntimeError):
    """The start procedure of a game could not be completed (e.g. a run_until timed out)."""
