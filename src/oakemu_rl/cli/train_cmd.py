"""`oakemu-rl train`: train an agent; with no arguments, DQN on the easy bundled game."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .arguments import non_negative_int, positive_float, positive_int, ray_address
from .errors import UsageError
from .process_setup import keep_freed_memory

if TYPE_CHECKING:
    from ..experiments import Experiment
    from ..runtime.config_base import ExperimentConfiguration


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
        choices=["dqn", "ppo", "distill"],
        default=None,
        help="algorithm (default: the --config file's algo, else dqn)",
    )
    parser.add_argument("--config", type=Path, help="YAML configuration file")
    parser.add_argument("--steps", type=positive_int, help="total env steps of the run")
    parser.add_argument(
        "--minutes",
        type=positive_float,
        help="train for this many minutes of wall clock (sets max_time_s; without --steps "
        "the clock alone is the budget, and schedules over the run anneal over it), then "
        "write the final checkpoint and evaluation",
    )
    parser.add_argument("--run-dir", type=Path, help="where the run's files go")
    parser.add_argument("--seed", type=non_negative_int, help="random seed")
    parser.add_argument(
        "--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR"
    )
    parser.add_argument(
        "--demos",
        type=Path,
        action="append",
        metavar="PATH",
        help="learn from these demonstrations (trajectory files or directories of them, "
        "e.g. from `oakemu-rl demo`); repeatable; sets demos.paths",
    )
    parser.add_argument(
        "--ray-address",
        type=ray_address,
        metavar="auto|HOST:PORT",
        help="run the env workers as actors on this Ray cluster ('auto': the one this "
        "machine has joined); sets env.backend: ray and env.ray_address",
    )
    parser.add_argument(
        "--num-workers",
        type=positive_int,
        metavar="N",
        help="env workers (processes, or Ray actors with --ray-address); sets env.num_workers",
    )
    parser.add_argument(
        "--init-from",
        type=Path,
        metavar="RUN",
        help="start a new DQN or PPO run from the student of the distill run RUN (its best "
        "checkpoint, else its newest): PPO loads the whole network, DQN the torso tensors "
        "whose names and shapes match",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    add_allow_code_flag(parser)
    parser.set_defaults(handler=run)


def add_allow_code_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-code",
        action="store_true",
        help="run Python code that the configuration names (a callable reward shaper, a "
        "gym:module:Env id); refused otherwise, since configs and run directories may come "
        "from anyone",
    )


def run(args: argparse.Namespace) -> int:
    from ..envs.backends import RayNotInstalledError, require_ray
    from ..envs.gym_backend import GymEnvError, check_gym_id, is_gym_id
    from ..experiments import RunError, RunFailed, read_algo, stop_on_signals
    from ..experiments.run_directory import CONFIG_NAME
    from ..games.loader import load_game
    from ..runtime.checkpoints import CheckpointError
    from ..runtime.config_base import ConfigError

    console = False if args.quiet else None
    keep_freed_memory()  # this program's own process: see process_setup
    try:
        experiment: Experiment[Any]
        if args.resume is not None:
            given = [
                flag
                for flag, value in (
                    ("--config", args.config),
                    ("--game", args.game),
                    ("--seed", args.seed),
                    ("--minutes", args.minutes),
                    ("--run-dir", args.run_dir),
                    ("--demos", args.demos),
                    ("--ray-address", args.ray_address),
                    ("--num-workers", args.num_workers),
                    ("--init-from", args.init_from),
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
            experiment = experiment_type(algo).from_run_dir(
                args.resume, total_steps=args.steps, console=console, allow_code=args.allow_code
            )
        else:
            config = load_config(args.algo, args.config, args.game)
            config = config.with_overrides(total_steps=args.steps, seed=args.seed)
            if args.minutes is not None:
                config = with_minutes(config, args.minutes, steps_given=args.steps is not None)
            if args.demos:
                config = with_demos(config, args.demos)
            config = with_workers(config, args.ray_address, args.num_workers)
            if config.env.backend == "ray":
                require_ray()
            # A wrong game fails here, before any worker starts or any file is written.
            if is_gym_id(config.game):
                check_gym_id(config.game)
            else:
                load_game(config.game)
            if args.run_dir is not None and (args.run_dir / CONFIG_NAME).exists():
                raise UsageError(
                    f"--run-dir {args.run_dir} already holds a run; continue it with "
                    f"--resume {args.run_dir} or choose another directory"
                )
            experiment = experiment_type(config.algo)(
                config,
                args.run_dir,
                console=console,
                allow_code=args.allow_code,
                init_from=args.init_from,
            )
        with stop_on_signals(experiment, restore=not args.as_program):
            experiment.run()
    except RunFailed as exc:
        print(f"oakemu-rl train: stopped: {exc}", file=sys.stderr)
        return 1
    except (
        ConfigError,
        RunError,
        CheckpointError,
        GymEnvError,
        RayNotInstalledError,
    ) as exc:
        raise UsageError(str(exc)) from None
    return 0


CLOCK_BUDGET_STEPS = 10**12
"""The step budget of a run that `--minutes` alone budgets: out of reach, so the clock ends it."""


def with_minutes(
    config: ExperimentConfiguration, minutes: float, *, steps_given: bool
) -> ExperimentConfiguration:
    """`config` budgeted in wall-clock minutes: `max_time_s`; without `--steps`, a step
    budget out of reach, so the clock alone ends the run."""
    changes: dict[str, Any] = {"max_time_s": minutes * 60}
    if not steps_given:
        changes["total_steps"] = CLOCK_BUDGET_STEPS
    return config.with_overrides(**changes)


def with_demos(config: ExperimentConfiguration, paths: list[Path]) -> ExperimentConfiguration:
    """`config` learning from the demonstrations under `paths` (each must exist)."""
    for path in paths:
        if not path.exists():
            raise UsageError(f"--demos {path}: no such file or directory")
    demos = config.demos.model_dump(mode="json") | {"paths": [str(p) for p in paths]}
    return config.with_overrides(demos=demos)


def with_workers(
    config: ExperimentConfiguration, address: str | None, num_workers: int | None
) -> ExperimentConfiguration:
    """`config` with the env workers of --ray-address and --num-workers."""
    changes: dict[str, Any] = {}
    if address is not None:
        changes.update(backend="ray", ray_address=address)
    if num_workers is not None:
        changes["num_workers"] = num_workers
    if not changes:
        return config
    return config.with_overrides(env={**config.env.model_dump(mode="json"), **changes})


def load_config(
    algo: str | None, path: Path | None, game: str | None = None
) -> ExperimentConfiguration:
    """The configuration of `--algo` (default: the file's `algo`, else dqn) for `--game`
    (default: the file's game, else the default game): the algorithm's preset for the
    game, if there is one, with the file at `path` laid over it."""
    from ..experiments import read_algo
    from ..runtime.config_base import read_settings

    if algo is None:
        algo = read_algo(path) if path is not None and path.is_file() else "dqn"
    config_type = experiment_type(algo).config_type
    settings = read_settings(path) if path is not None else {}
    source = str(path) if path is not None else "the configuration"
    return config_type.for_game(game, settings, source)


def experiment_type(algo: str) -> type[Experiment[Any]]:
    """The experiment class of `algo`; a UsageError for an unknown one."""
    from ..experiments import EXPERIMENTS

    if algo not in EXPERIMENTS:
        raise UsageError(f"unknown algo {algo!r}; expected one of: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[algo]
