"""Game definitions: the YAML schema, its loader, and the rules that score a running game."""

from .errors import GameDefinitionError, StartProcedureError
from .loader import GameDefinition, bundled_games, load_game, resolve_game_path
from .session import GameSession, GameStep

__all__ = [
    "GameDefinition",
    "GameDefinitionError",
    "GameSession",
    "GameStep",
    "StartProcedureError",
    "bundled_games",
    "load_game",
    "resolve_game_path",
]
