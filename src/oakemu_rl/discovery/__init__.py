"""Finding what a game definition needs by watching the game run.

`screen_text` reads text and numbers off the screen (ROM and RAM fonts); `memory_search`
records RAM while the game plays and finds variables such as the score and the lives.
"""

from .memory_search import (
    Candidate,
    ChangedBy,
    Constraint,
    Equals,
    EqualsScreen,
    FallsByOne,
    OnlyRises,
    RamRecording,
    RisesWith,
    ScoreAndLives,
    find_score_and_lives,
    find_variables,
    record_ram,
)
from .screen_text import Font, ScreenLine, ScreenNumber, find_fonts, read_numbers, read_screen_text

__all__ = [
    "Candidate",
    "ChangedBy",
    "Constraint",
    "Equals",
    "EqualsScreen",
    "FallsByOne",
    "Font",
    "OnlyRises",
    "RamRecording",
    "RisesWith",
    "ScoreAndLives",
    "ScreenLine",
    "ScreenNumber",
    "find_fonts",
    "find_score_and_lives",
    "find_variables",
    "read_numbers",
    "read_screen_text",
    "record_ram",
]
