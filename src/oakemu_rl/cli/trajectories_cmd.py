"""`oakemu-rl trajectories PATH`: list trajectory files and how their episodes went."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..trajectories.trajectory_file import SUFFIX, Trajectory, load_trajectories
from .errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "trajectories",
        help="list trajectory files: source, outcome, return, score, length, start",
        description=f"List trajectory files. PATH is a training run's directory (its "
        f"trajectories/ folder), any directory (every *{SUFFIX} under it) or one file.",
    )
    parser.add_argument("path", type=Path, metavar="PATH")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(handler=run)


def trajectory_row(path: Path, trajectory: Trajectory) -> dict[str, Any]:
    """One trajectory's entry in the listing (the fields of `--json`)."""
    return {
        "path": str(path),
        "game": trajectory.game,
        "source": trajectory.source,
        "outcome": trajectory.outcome,
        "return": trajectory.episode_return,
        "score": trajectory.score,
        "length": trajectory.length,
        "lives_lost": trajectory.lives_lost,
        "start": trajectory.start_label,
    }


def run(args: argparse.Namespace) -> int:
    source: Path = args.path
    if (source / "trajectories").is_dir():
        source = source / "trajectories"
    found = load_trajectories([source])
    if not found:
        raise UsageError(f"{source}: no trajectory files (*{SUFFIX}) found")
    rows = [trajectory_row(path, trajectory) for path, trajectory in found]
    if args.json:
        print(json.dumps(rows))
        return 0
    base = source if source.is_dir() else source.parent
    header = ("file", "source", "outcome", "return", "score", "length", "lives lost", "start")
    lines = [header] + [
        (
            str(path.relative_to(base)),
            row["source"],
            row["outcome"] or "-",
            f"{row['return']:g}",
            f"{row['score']:g}",
            str(row["length"]),
            str(row["lives_lost"]),
            row["start"],
        )
        for (path, _), row in zip(found, rows, strict=True)
    ]
    # A plain table: piped or in a narrow terminal, nothing is cut or wrapped.
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    numeric = {3, 4, 5, 6}
    for line in lines:
        cells = [
            cell.rjust(width) if i in numeric else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
    return 0
