"""`oakemu-rl train`: train an agent; with no arguments, DQN on the easy bundled game."""

from __future__ import annotations

import argparse
from pathlib import Path

from .errors import UsageError


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "train",
        help="train an agent (with no arguments: DQN on the bundled game 'catch')",
        description="Train an agent. The run directory gets the resolved config, "
        "TensorBoard events, checkpoints and summary.json.",
    )
    parser.add_argument("--game", help="bundled game name, game YAML path or gym:<id>")
    parser.add_argument(
        "--algo",
        choices=["dqn", "ppo"],
        default=None,
        help="algorithm (default: the --config file's algo, else dqn)",
    )
    parser.add_argument("--config", type=Path, help="YAML configuration file")
    parser.add_argument("--steps", type=_positive_int, help="total env steps of the run")
    parser.add_argument("--run-dir", type=Path, help="where the run's files go")
    parser.add_argument("--seed", type=_non_negative_int, help="random seed")
    parser.add_argument(
        "--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..dqn.config import DQNExperimentConfiguration
    from ..envs.gym_backend import is_gym_id
    from ..experiments.dqn_experiment import CONFIG_NAME, DQNExperiment, RunError
    from ..experiments.ppo_experiment import PPOExperiment, read_algo
    from ..games.loader import load_game
    from ..ppo.config import PPOExperimentConfiguration
    from ..runtime.checkpoints import CheckpointError
    from ..runtime.config_base import ConfigError

    console = False if args.quiet else None
    try:
        if args.resume is not None:
            given = [
                flag
                for flag, value in (
                    ("--config", args.config),
                    ("--game", args.game),
                    ("--seed", args.seed),
                    ("--run-dir", args.run_dir),
                )
                if value is not None
            ]
            if given:
                raise UsageError(
                    f"--resume continues a run with its own configuration; "
                    f"{', '.join(given)} cannot change it (only --steps can)"
                )
            resumed = args.resume / CONFIG_NAME
            algo = read_algo(resumed) if resumed.is_file() else "dqn"
            if args.algo is not None and args.algo != algo:
                raise UsageError(f"--algo {args.algo}: {args.resume} is a {algo} run")
            experiment: DQNExperiment | PPOExperiment = (
                PPOExperiment if algo == "ppo" else DQNExperiment
            ).from_run_dir(args.resume, total_steps=args.steps, console=console)
        else:
            algo = args.algo or (
                read_algo(args.config)
                if args.config is not None and args.config.is_file()
                else "dqn"
            )
            config_class: type[DQNExperimentConfiguration | PPOExperimentConfiguration] = (
                PPOExperimentConfiguration if algo == "ppo" else DQNExperimentConfiguration
            )
            config = (
                config_class.from_yaml(args.config) if args.config is not None else config_class()
            )
            config = config.with_overrides(game=args.game, total_steps=args.steps, seed=args.seed)
            if not is_gym_id(config.game):
                load_game(config.game)  # a wrong game fails here, before any worker starts
            if args.run_dir is not None and (args.run_dir / CONFIG_NAME).exists():
                raise UsageError(
                    f"--run-dir {args.run_dir} already holds a run; continue it with "
                    f"--resume {args.run_dir} or choose another directory"
                )
            if isinstance(config, PPOExperimentConfiguration):
                experiment = PPOExperiment(config, args.run_dir, console=console)
            else:
                experiment = DQNExperiment(config, args.run_dir, console=console)
        experiment.run()
    except (ConfigError, RunError, CheckpointError) as exc:
        raise UsageError(str(exc)) from None
    return 0
