"""`oakemu-rl evaluate RUN_DIR|CHECKPOINT`: episodes with a trained agent (greedy, with
`--epsilon` for DQN or `--sample` for PPO and distill), or random play (`--random`); with
`--all`, every checkpoint a run kept, on the same episodes, and which of them plays best."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..envs.lives import win_rate_text
from .arguments import non_negative_int, positive_int
from .errors import UsageError
from .train_cmd import add_allow_code_flag

if TYPE_CHECKING:
    from ..runtime.checkpoints import Checkpoint
    from ..runtime.tester import EvaluationResult


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "evaluate",
        help="play episodes with a trained agent: mean return, mean score, win rate",
        description="Play episodes with a trained agent. RUN_DIR means the run's best "
        "checkpoint by evaluation (the low end of its 95% confidence interval of the mean "
        "return; the newest one when none was evaluated); "
        "--last takes its newest instead; a checkpoint directory means that checkpoint. The "
        "checkpoint used is printed (and is in --json's output).",
    )
    parser.add_argument("target", type=Path, metavar="RUN_DIR|CHECKPOINT")
    parser.add_argument("--episodes", type=positive_int, default=30, help="episodes (default 30)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--last",
        action="store_true",
        help="a run's newest checkpoint (default: its best by evaluation, or the "
        "newest when none was evaluated)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="every checkpoint the run kept, each on the same episodes (same --seed), and "
        "the one that plays best: the most games won, then the most won with no life lost, "
        "then the highest mean return. The run's own choice rests on its evaluations' few "
        "episodes; this one on --episodes of them",
    )
    parser.add_argument(
        "--seed",
        type=non_negative_int,
        help="env seed: episode k is reset with SEED + k and draws its random actions from "
        "a generator of its own, so the same --seed plays the same episodes whatever "
        "--num-envs, and play-onnx with the same --seed plays them too (default: the run's "
        "seed + 2,000,003)",
    )
    parser.add_argument(
        "--num-envs",
        type=positive_int,
        help="envs played at once (default: the run's tester.num_envs)",
    )
    parser.add_argument(
        "--epsilon", type=float, help="DQN: random-action rate (default: the config's)"
    )
    parser.add_argument(
        "--sample",
        action="store_true",
        help="PPO and distill: draw each action from the policy instead of taking the most "
        "likely one (default: the config's tester.deterministic)",
    )
    parser.add_argument(
        "--random",
        action="store_true",
        help="play uniformly random actions instead of the agent: the baseline to beat, on "
        "the same envs and seeds",
    )
    parser.add_argument(
        "--video",
        type=Path,
        metavar="FILE",
        help="also record greedy episodes to a .gif (or .mp4 with imageio-ffmpeg): the "
        "Spectrum's screen with its border, score, lives, step and action; the same file "
        "for the same --seed",
    )
    parser.add_argument(
        "--video-episodes", type=positive_int, default=1, help="episodes in the video (1)"
    )
    parser.add_argument("--scale", type=positive_int, default=2, help="video pixel scale (2)")
    parser.add_argument(
        "--video-steps",
        type=positive_int,
        help="cut each video episode after this many steps (default: the run's "
        "tester.max_episode_steps)",
    )
    add_allow_code_flag(parser)
    parser.set_defaults(handler=run)


def _clean(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _normalised(checkpoint: Any, mean_score: float, allow_code: bool) -> float | None:
    """The mean score as a normalised score, where the game's reference is cached (None
    for a Gymnasium env, a game with no cached reference, or a reference whose search and
    random play score alike)."""
    from ..experiments.evaluation import read_checkpoint_config
    from ..games.loader import load_game
    from ..trajectories.reference import load_reference

    _, config = read_checkpoint_config(checkpoint, allow_code=allow_code)
    if config.game.startswith("gym:"):
        return None
    reference = load_reference(load_game(config.game))
    if reference is None or reference.search_score == reference.random_score:
        return None
    return reference.normalise(mean_score)


def run(args: argparse.Namespace) -> int:
    from ..envs.gym_backend import GymEnvError
    from ..experiments import RunError, evaluate_checkpoint, find_checkpoint
    from ..experiments.evaluation import PolicyOptionError
    from ..runtime.checkpoints import CheckpointError
    from ..runtime.config_base import ConfigError
    from ..visual.video import VideoError, record_checkpoint

    if args.epsilon is not None and not 0.0 <= args.epsilon <= 1.0:
        raise UsageError(f"--epsilon must be between 0 and 1, got {args.epsilon}")
    if args.random and (args.epsilon is not None or args.video is not None or args.sample):
        raise UsageError(
            "--random plays random actions: it takes neither --epsilon, --sample nor --video"
        )
    if args.sample and args.video is not None:
        raise UsageError("--video records the most likely actions: it does not take --sample")
    if args.video is not None and args.video.suffix.lower() not in (".gif", ".mp4"):
        raise UsageError(f"--video {args.video}: expected a .gif or .mp4 file")
    if args.all and (args.last or args.video is not None):
        raise UsageError("--all plays every checkpoint: it takes neither --last nor --video")
    try:
        if args.all:
            checkpoints = _kept_checkpoints(args.target)
        else:
            checkpoints = [find_checkpoint(args.target, best=not args.last)]
        rows = []
        for checkpoint in checkpoints:
            result = evaluate_checkpoint(
                checkpoint,
                args.episodes,
                seed=args.seed,
                epsilon=args.epsilon,
                deterministic=False if args.sample else None,
                random_policy=args.random,
                num_envs=args.num_envs,
                allow_code=args.allow_code,
            )
            normalised = _normalised(checkpoint, result.mean_score, args.allow_code)
            rows.append((checkpoint, result, normalised))
        video = None
        if args.video is not None:
            video = record_checkpoint(
                checkpoints[0],
                args.video,
                episodes=args.video_episodes,
                seed=args.seed if args.seed is not None else 0,
                scale=args.scale,
                max_steps=args.video_steps,
                allow_code=args.allow_code,
            )
    except PolicyOptionError as exc:  # an option of the other algorithm
        flag = {"epsilon": "--epsilon", "deterministic": "--sample"}[exc.option]
        raise UsageError(f"{flag} {exc.reason}") from None
    except (ConfigError, RunError, CheckpointError, GymEnvError, VideoError) as exc:
        raise UsageError(str(exc)) from None
    if args.all:
        best = max(rows, key=lambda row: _ranking(row[1]))[0]
        if args.json:
            listed = [_as_json(*row) for row in rows]
            print(json.dumps({"checkpoints": listed, "best": str(best.path), "step": best.step}))
        else:
            for checkpoint, result, normalised in rows:
                print(f"step {checkpoint.step:>10,}: {_result_text(result, normalised)}")
            print(f"best: {best.path} (step {best.step:,})")
        return 0
    checkpoint, result, normalised = rows[0]
    if args.json:
        found = _as_json(checkpoint, result, normalised)
        found["video"] = str(video.path) if video is not None else None
        print(json.dumps(found))
    else:
        print(f"checkpoint {checkpoint.path} (step {checkpoint.step:,})")
        print(_result_text(result, normalised))
        if video is not None:
            print(
                f"video: {video.path} ({video.episodes} episode(s), {len(video.frames)} frames, "
                f"returns {', '.join(f'{r:g}' for r in video.returns)})"
            )
    return 0


def _kept_checkpoints(target: Path) -> list[Checkpoint]:
    """Every checkpoint of a run directory that passes its checksums, oldest first."""
    from ..experiments import RunError
    from ..runtime.checkpoints import CheckpointManager

    if not (target / "checkpoints").is_dir():
        raise RunError(f"{target}: --all takes a run directory (one with checkpoints/)")
    manager = CheckpointManager(target / "checkpoints", warn=lambda m: print(m, file=sys.stderr))
    checkpoints = manager.list(verify=True)
    if not checkpoints:
        raise RunError(f"{target}: no valid checkpoint found")
    return checkpoints


def _ranking(result: EvaluationResult) -> tuple[float, float, float]:
    """Wins first, then wins with no life lost, then mean return (nan counts as least)."""
    wins, clean, mean = (
        v if math.isfinite(v) else -math.inf
        for v in (result.win_rate, result.clean_win_rate, result.mean_return)
    )
    return wins, clean, mean


def _as_json(
    checkpoint: Checkpoint, result: EvaluationResult, normalised: float | None
) -> dict[str, Any]:
    return {
        "episodes": result.episodes,
        "mean_return": _clean(result.mean_return),
        "mean_score": _clean(result.mean_score),
        "win_rate": _clean(result.win_rate),
        "clean_win_rate": _clean(result.clean_win_rate),
        "std_return": _clean(result.std_return),
        "median_return": _clean(result.median_return),
        "ci95_low": _clean(result.ci95_low),
        "ci95_high": _clean(result.ci95_high),
        "mean_length": _clean(result.mean_length),
        "policy": result.policy,
        "normalised_score": normalised,
        "checkpoint": str(checkpoint.path),
        "step": checkpoint.step,
    }


def _result_text(result: EvaluationResult, normalised: float | None) -> str:
    text = (
        f"{result.episodes} episodes: {result.interval}, std {result.std_return:.2f}, "
        f"mean score {result.mean_score:.2f}, "
        f"win rate {win_rate_text(result.win_rate, result.clean_win_rate)}, "
        f"mean length {result.mean_length:.0f} ({result.policy} policy)"
    )
    if normalised is not None:
        text += (
            f"\nnormalised score {normalised:.3f} "
            "((score - random) / (search - random), from `oakemu-rl reference`)"
        )
    return text
