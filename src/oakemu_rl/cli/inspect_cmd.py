"""`oakemu-rl inspect GAME`: check a game YAML and see what the agent sees."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from rich.console import Console
from rich.table import Table

from ..emulator.screen import to_rgb
from ..envs.oakemu_env import OakEmuEnv
from ..envs.observation import ObservationConfig
from ..envs.observation_choice import choose_observation
from ..games.loader import load_game
from .arguments import non_negative_int
from .errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "inspect",
        help="validate a game YAML, run its start procedure, show variables and write PNGs",
    )
    parser.add_argument("game", help="bundled game name or path to a game YAML")
    parser.add_argument("--out", default="inspect_out", help="folder for the PNGs")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed for start.randomize")
    parser.add_argument(
        "--steps",
        type=non_negative_int,
        default=0,
        help="random agent steps to take before the pictures",
    )
    parser.add_argument(
        "--height", type=_sized(8, 192), default=84, help="observation height (8-192)"
    )
    parser.add_argument(
        "--width", type=_sized(8, 256), default=84, help="observation width (8-256)"
    )
    parser.add_argument("--colour", action="store_true", help="colour instead of grayscale")
    parser.set_defaults(handler=run)


def _sized(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}-{high}, got {value}")
        return value

    return parse


def run(args: argparse.Namespace) -> int:
    console = Console()
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; give a folder for the PNGs")
    game = load_game(args.game)
    spec = game.spec
    console.print(f"[bold]{spec.name}[/] ({game.path}) is valid: {spec.machine}, "
                  f"snapshot {spec.snapshot}, {len(spec.actions)} actions")  # fmt: skip
    auto = choose_observation(ObservationConfig(type="auto", frame_stack=1), game)
    console.print(f"observation type auto chooses {auto.describe()}", highlight=False)
    config = ObservationConfig(
        height=args.height, width=args.width, grayscale=not args.colour, frame_stack=1
    )
    env = OakEmuEnv(game, config, seed=args.seed)
    obs, info = env.reset()
    console.print(f"start procedure done in {env.machine.frame_count} frames")
    rng = np.random.default_rng(args.seed)
    events: dict[str, int] = {}
    total = 0.0
    for _ in range(args.steps):
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(env.num_actions)))
        total += reward
        for name in info["events"]:
            events[name] = events.get(name, 0) + 1
        if terminated or truncated:
            console.print(f"episode ended: {info['outcome']}")
            break
    if args.steps:
        console.print(f"{args.steps} random steps: return {total:g}, events {events or 'none'}")

    table = Table(title="Data variables")
    for column in ("name", "address", "type", "raw bytes", "value"):
        table.add_column(column)
    machine = env.machine
    for name, var in spec.data.items():
        raw = machine.read(var.address, var.size)
        table.add_row(
            name, f"0x{var.address:04X}", var.type, raw.hex(" "), str(info["values"][name])
        )
    console.print(table)

    out.mkdir(parents=True, exist_ok=True)
    screen = Image.fromarray(to_rgb(machine.screen())).resize((512, 384), Image.Resampling.NEAREST)
    area = spec.play_area
    ImageDraw.Draw(screen).rectangle(
        (2 * area.x, 2 * area.y, 2 * (area.x + area.width) - 1, 2 * (area.y + area.height) - 1),
        outline=(255, 0, 255),
        width=2,
    )
    screen_path = out / f"{game.key}_screen.png"
    screen.save(screen_path)
    frame = obs if config.grayscale else obs.transpose(1, 2, 0)
    if config.grayscale:
        frame = frame[0]
    scale = max(1, 384 // max(config.height, 1))
    observation = Image.fromarray(frame).resize(
        (config.width * scale, config.height * scale), Image.Resampling.NEAREST
    )
    observation_path = out / f"{game.key}_observation.png"
    observation.save(observation_path)
    console.print(f"wrote {screen_path} (play area outlined) and {observation_path} "
                  f"({config.height}x{config.width} observation)")  # fmt: skip
    env.close()
    return 0
