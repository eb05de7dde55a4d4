"""`oakemu-rl play GAME --record FILE`: play a game yourself and record the episode."""

from __future__ import annotations

import argparse
from pathlib import Path

from .arguments import non_negative_int, positive_int
from .errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "play",
        help="play a game in a window with the keyboard and record it as a trajectory file",
        description="Play a game in a window, paced as on a Spectrum, and save the episode "
        "as a trajectory file (also when stopped early with Esc or by closing the window). "
        "Letters, digits, Space and Enter are the Spectrum's keys; Shift is CAPS_SHIFT, Alt "
        "SYMBOL_SHIFT, Ctrl KEMPSTON_FIRE; the arrow keys stand for the game's direction "
        "keys where it uses a known pair (Kempston, O/P, Z/X, 5/8; Q/A, 7/6).",
    )
    parser.add_argument("game", help="bundled game name or path to a game YAML")
    parser.add_argument(
        "--record",
        type=Path,
        required=True,
        metavar="FILE",
        help="the trajectory file to write (NAME.trajectory.json)",
    )
    parser.add_argument("--scale", type=positive_int, default=3, help="window pixel scale (3)")
    parser.add_argument("--seed", type=non_negative_int, help="seed of the episode's start")
    parser.add_argument(
        "--max-steps", type=positive_int, help="end the episode after this many steps"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..trajectories.human_play import PlayError, play

    try:
        result = play(
            args.game, args.record, scale=args.scale, seed=args.seed, max_steps=args.max_steps
        )
    except PlayError as exc:
        raise UsageError(str(exc)) from None
    t = result.trajectory
    print(
        f"recorded {t.length} steps of {t.game}: {t.outcome or 'stopped'}, return "
        f"{t.episode_return:g}, score {t.score:g}, {t.lives_lost} lives lost ({t.start_label}) "
        f"-> {result.path}"
    )
    return 0
