"""`oakemu-rl replay FILE`: replay a trajectory file, checking it against its game, or
make a GIF of it."""

from __future__ import annotations

import argparse
from pathlib import Path

from PIL import Image

from ..envs.oakemu_env import OakEmuEnv
from ..envs.observation import ObservationConfig
from ..envs.recording import action_name, frame_duration_ms, gif_bytes, spectrum_frame, with_status
from ..games.loader import GameDefinition, bundled_games, load_game
from ..trajectories.materialise import replay, start
from ..trajectories.trajectory_file import Trajectory, TrajectoryFileError
from .arguments import positive_int
from .errors import UsageError

ENDINGS = ("win", "loss")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "replay",
        help="replay a trajectory file: check that it still fits its game, or make a GIF",
        description="Replay a trajectory file's actions from its start and check every "
        "reward and the outcome against the recording. The game is the one the trajectory "
        "names (a bundled game or a YAML path) unless --game is given; either way it must "
        "be the very YAML the trajectory was recorded with.",
    )
    parser.add_argument("file", type=Path, metavar="FILE")
    parser.add_argument(
        "--game", help="bundled game name or path to a game YAML (default: the recorded one)"
    )
    parser.add_argument(
        "--video",
        type=Path,
        metavar="OUT.gif",
        help="write a GIF of the Spectrum's screen with step, score, lives and action",
    )
    parser.add_argument("--scale", type=positive_int, default=2, help="video pixel scale (2)")
    parser.add_argument(
        "--every",
        type=positive_int,
        default=1,
        metavar="K",
        help="a video frame every K steps (1), each shown K times as long",
    )
    parser.set_defaults(handler=run)


def trajectory_game(path: Path, trajectory: Trajectory, game: str | None = None) -> GameDefinition:
    """The game to replay `trajectory` (read from `path`) with: `game`, else the game file
    it names; refused unless it is the YAML the trajectory was recorded with."""
    if game is not None:
        definition = load_game(game)
    elif trajectory.game_file in bundled_games():
        definition = load_game(trajectory.game_file)
    else:
        yaml_path = Path(trajectory.game_file)
        if not yaml_path.is_absolute() and not yaml_path.exists():
            yaml_path = path.parent / yaml_path
        if not yaml_path.is_file():
            raise UsageError(
                f"{path}: recorded with game file {trajectory.game_file!r}, which is neither "
                "a bundled game nor an existing YAML; name the game with --game"
            )
        definition = load_game(yaml_path)
    trajectory.check_game(definition.key, definition.yaml_sha256, origin=str(path))
    return definition


def _status(step: int, info: dict[str, object], action: str | None) -> str:
    text = f"step {step}  score {info.get('score', 0)}  lives {info.get('lives')}"
    return f"{text}  action {action}" if action is not None else text


def run(args: argparse.Namespace) -> int:
    path: Path = args.file
    if args.video is not None and args.video.suffix.lower() != ".gif":
        raise UsageError(f"--video {args.video}: expected a .gif file")
    trajectory = Trajectory.load(path)
    game = trajectory_game(path, trajectory, args.game)
    names = [action_name(list(keys)) for keys in game.spec.actions]
    # Only rewards and outcomes are compared: the smallest observations will do.
    env = OakEmuEnv(game, ObservationConfig(height=8, width=8, frame_stack=1))
    frames: list[Image.Image] = []
    scale, every = args.scale, args.every
    try:
        _, info = start(env, trajectory)
        if args.video is not None:
            frames.append(with_status(spectrum_frame(env, scale), _status(0, info, None), scale))
        total = 0.0
        outcome: str | None = None
        for step in replay(env, trajectory):
            total += step.reward
            info, outcome = step.info, step.info.get("outcome")
            done = step.index + 1
            if args.video is not None and (done % every == 0 or done == trajectory.length):
                status = _status(done, info, names[step.action])
                frames.append(with_status(spectrum_frame(env, scale), status, scale))
        duration = frame_duration_ms(env) * every
    except TrajectoryFileError as exc:
        raise TrajectoryFileError(f"{path}: {exc}") from None
    finally:
        env.close()
    if (trajectory.outcome in ENDINGS or outcome in ENDINGS) and outcome != trajectory.outcome:
        raise TrajectoryFileError(
            f"{path}: the recording ended with outcome {trajectory.outcome or 'null'}, the "
            f"replay with {outcome or 'none'} (was it recorded with another version of the "
            "game?)"
        )
    if args.video is not None:
        args.video.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.video.with_name(f".{args.video.stem}.tmp.gif")
        tmp.write_bytes(gif_bytes(frames, duration))
        tmp.replace(args.video)
        print(f"wrote {args.video} ({len(frames)} frames, {duration} ms each)")
    print(
        f"replayed {trajectory.length} steps of {game.key}: "
        f"{trajectory.outcome or 'no outcome'}, return {total:g}, "
        f"score {float(info.get('score', 0)):g}; matches the recording"
    )
    return 0
