"""`oakemu-rl config show`: the effective configuration of a run, as commented YAML."""

from __future__ import annotations

import argparse
from pathlib import Path

from .errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "config",
        help="show the effective configuration of a run (commented YAML, ready to edit)",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser(
        "show",
        help="print every setting with its value and what it does",
        description="Print the configuration `oakemu-rl train` would use with the same "
        "--algo, --game and --config, as YAML with a comment on each setting. Save it, edit "
        "it and train with it: oakemu-rl train --config FILE.",
    )
    show.add_argument(
        "--algo",
        choices=["dqn", "ppo", "distill"],
        default=None,
        help="algorithm (default: the --config file's algo, else dqn)",
    )
    show.add_argument("--game", help="bundled game name, game YAML path or gym:<id>")
    show.add_argument("--config", type=Path, help="a YAML configuration to start from")
    show.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..envs.observation_choice import auto_choice
    from ..presets import find_preset
    from ..runtime.config_base import ConfigError
    from .train_cmd import load_config

    try:
        config = load_config(args.algo, args.config, args.game)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    preset = find_preset(config.algo, config.game)
    where = (
        f"# Preset: {preset.name}, the package's tuned settings for this game ({preset.path});\n"
        "# a --config file and the command line override them.\n"
        if preset is not None
        else "# No preset for this game: the defaults, under a --config file and the flags.\n"
    )
    print(
        f"# OakEmu-RL {config.algo} configuration for {config.game}.\n"
        f"{where}"
        f"# Train with it: oakemu-rl train --config FILE (settings left out keep their "
        f"defaults)."
    )
    choice = auto_choice(config.env.observation, config.game)
    if choice is not None:
        print(f"# env.observation.type auto chose {choice.describe()}.")
    print(config.to_commented_yaml(), end="")
    return 0
