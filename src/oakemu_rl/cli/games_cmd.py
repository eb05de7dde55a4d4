"""`oakemu-rl games`: list the bundled games."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from ..games.loader import bundled_games, load_game


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("games", help="list the bundled games")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    table = Table(title="Bundled games")
    for column in ("name", "title", "machine", "actions", "frame skip", "description"):
        table.add_column(column)
    for key, path in bundled_games().items():
        spec = load_game(path).spec
        table.add_row(
            key, spec.name, spec.machine, str(len(spec.actions)), str(spec.frame_skip),
            spec.description,
        )  # fmt: skip
    Console().print(table)
    return 0
