"""Entry point of the `oakemu-rl` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from .. import __version__
from . import (
    config_cmd,
    demo_cmd,
    evaluate_cmd,
    export_cmd,
    games_cmd,
    inspect_cmd,
    memory_cmd,
    new_game_cmd,
    play_cmd,
    play_onnx_cmd,
    plot_cmd,
    reference_cmd,
    replay_cmd,
    routines_cmd,
    snapshot_cmd,
    train_cmd,
    trajectories_cmd,
)
from .errors import USER_ERRORS


class _ExactFlagsParser(argparse.ArgumentParser):
    """Takes flags only as spelled: argparse would read `--all` or `--allow` as
    `--allow-code`, or a new flag's abbreviation as an old one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _ExactFlagsParser(
        prog="oakemu-rl", description="Deep reinforcement learning on ZX Spectrum games."
    )
    parser.add_argument("--version", action="version", version=f"oakemu-rl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = (
        games_cmd,
        inspect_cmd,
        train_cmd,
        evaluate_cmd,
        demo_cmd,
        reference_cmd,
        plot_cmd,
        export_cmd,
        play_onnx_cmd,
        trajectories_cmd,
        replay_cmd,
        play_cmd,
        snapshot_cmd,
        memory_cmd,
        routines_cmd,
        new_game_cmd,
    )
    for module in (*commands, config_cmd):
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` (default: the program's own arguments, ``sys.argv``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # Called with no argv, main runs as the program and may settle process-wide matters
    # (signal dispositions) for the rest of the process's life; called with an argv (from a
    # script or a test), it leaves the process as it found it.
    args.as_program = argv is None
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args))
    except USER_ERRORS as exc:
        print(f"oakemu-rl {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"oakemu-rl {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Whoever read the output stopped reading (`oakemu-rl config show | head`): not an
        # error. Point stdout at /dev/null so that Python's final flush does not fail too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
