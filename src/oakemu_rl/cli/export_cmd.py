"""`oakemu-rl export RUN|CHECKPOINT --out policy.onnx`: the greedy policy as ONNX."""

from __future__ import annotations

import argparse
from pathlib import Path

from .errors import UsageError
from .train_cmd import add_allow_code_flag


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "export",
        help="export a trained agent's greedy policy to ONNX (play it with play-onnx)",
        description="Export the greedy policy of a checkpoint (a run directory: its best "
        "checkpoint) to an ONNX file (opset 18, any batch size, checked with onnx.checker) "
        "that holds what it plays and how it sees: the game, its YAML's hash, the action "
        "set and the observation settings.",
    )
    parser.add_argument("target", type=Path, metavar="RUN_DIR|CHECKPOINT")
    parser.add_argument("--out", type=Path, required=True, help="the .onnx file to write")
    add_allow_code_flag(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..envs.gym_backend import GymEnvError
    from ..experiments import RunError
    from ..export.onnx_export import export_policy
    from ..runtime.checkpoints import CheckpointError
    from ..runtime.config_base import ConfigError

    if args.out.is_dir():
        raise UsageError(f"--out {args.out}: is a folder; give the .onnx file to write")
    if not args.out.parent.is_dir():
        raise UsageError(f"--out {args.out}: the folder {args.out.parent} does not exist")
    try:
        exported = export_policy(args.target, args.out, allow_code=args.allow_code)
    except (ConfigError, RunError, CheckpointError, GymEnvError) as exc:
        raise UsageError(str(exc)) from None
    meta = exported.metadata
    print(
        f"{exported.path}: the greedy {meta.algo} policy of {exported.checkpoint.path} "
        f"(step {meta.checkpoint_step:,}) for {meta.game_name}, {len(meta.actions)} actions, "
        f"observations {meta.observation['shape']} {meta.observation['dtype']}"
    )
    return 0
