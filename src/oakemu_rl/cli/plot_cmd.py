"""`oakemu-rl plot RUN [RUN ...] --out curves.png`: learning curves from TensorBoard events."""

from __future__ import annotations

import argparse
from pathlib import Path

from .errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "plot",
        help="draw learning curves of one or more runs (PNG, SVG or PDF)",
        description="Draw the mean return, mean score and win rate of training episodes and "
        "the loss, against env steps and against wall time, from the runs' TensorBoard "
        "events. Runs whose configurations differ only in the seed are drawn as one line "
        "(their mean) with a band from the lowest to the highest run.",
    )
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR")
    parser.add_argument("--out", type=Path, default=Path("curves.png"), help="image file")
    parser.add_argument("--title", help="a title over the plots")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..visual.curves import PlotError, plot_runs

    suffix = args.out.suffix.lower()
    if suffix not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--out {args.out}: expected a .png, .svg or .pdf file")
    for run_dir in args.runs:
        if not run_dir.is_dir():
            raise UsageError(f"{run_dir}: no such run directory")
    try:
        groups = plot_runs(args.runs, args.out, args.title)
    except PlotError as exc:
        raise UsageError(str(exc)) from None
    print(f"{args.out}: " + "; ".join(f"{g.label}" for g in groups))
    return 0
