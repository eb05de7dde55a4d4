"""`oakemu-rl play-onnx GAME policy.onnx`: play an exported policy with onnxruntime alone.

Never imports torch: this is what a user runs where only the policy file is deployed.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ..envs.lives import win_rate_text
from .arguments import non_negative_int, positive_int
from .errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "play-onnx",
        help="play greedy episodes with an exported ONNX policy (onnxruntime, no torch)",
        description="Play episodes of GAME with an exported policy, one after another on "
        "one env: episode k gets env seed --seed + k (as `oakemu-rl evaluate RUN --seed S` "
        "plays them).",
    )
    parser.add_argument("game", help="bundled game name, game YAML path or gym:<id>")
    parser.add_argument("policy", type=Path, help="an .onnx file written by oakemu-rl export")
    parser.add_argument("--episodes", type=positive_int, default=30, help="episodes (default 30)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="first env seed")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..export import OnnxPolicy, PolicyFileError, play_onnx

    try:
        policy = OnnxPolicy(args.policy)
        result = play_onnx(policy, args.game, args.episodes, args.seed)
    except PolicyFileError as exc:
        raise UsageError(str(exc)) from None
    summary = result.to_dict()
    if args.json:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                 for k, v in summary.items()}  # fmt: skip
        print(json.dumps(clean))
        return 0
    for warning in result.warnings:
        print(f"warning: {warning}")
    print(
        f"{summary['episodes']} episodes: mean return {summary['mean_return']:.2f}, mean score "
        f"{summary['mean_score']:.2f}, win rate "
        f"{win_rate_text(summary['win_rate'], summary['clean_win_rate'])}, mean length "
        f"{summary['mean_length']:.0f}"
    )
    return 0
