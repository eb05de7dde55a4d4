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
from ..games.schema import GameSpec
from ..games.session import reward_term_names
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
    by_source: dict[str, float] = {}
    total = 0.0
    for _ in range(args.steps):
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(env.num_actions)))
        total += reward
        for name, value in info["reward_terms"].items():
            by_source[name] = by_source.get(name, 0.0) + value
        for name in info["events"]:
            events[name] = events.get(name, 0) + 1
        if terminated or truncated:
            console.print(f"episode ended: {info['outcome']}")
            break
    if args.steps:
        console.print(f"{args.steps} random steps: return {total:g}, events {events or 'none'}")
        for line in reward_breakdown(spec, by_source):
            console.print(line, highlight=False)

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


# A negative term at least this many times all positive terms together gets a warning.
OUTWEIGHS_RATIO = 5.0


def reward_breakdown(spec: GameSpec, by_source: dict[str, float]) -> list[str]:
    """The lines that show a return by source (term name: total), in the YAML's order,
    and a warning for each negative term that outweighs all the positive ones 5 to 1."""
    names = reward_term_names(spec)
    order = [term for term in names.values() if term in by_source]
    order += [term for term in by_source if term not in order]
    parts = [f"{term} {_signed(by_source[term])}" for term in order]
    lines = [f"return by source: {', '.join(parts) or 'none'}"]
    gained = sum(value for value in by_source.values() if value > 0)
    sources = {term: key for key, term in names.items()}
    for term in order:
        lost = by_source[term]
        if lost >= 0 or -lost < OUTWEIGHS_RATIO * gained:
            continue
        what = _describe(sources.get(term, term))
        if gained > 0:
            weight = f"outweighs everything the reward gives ({_signed(gained)}) "
            weight += f"{int(-lost / gained)} to 1"
        else:
            weight = "is not offset by anything the reward gives (nothing positive)"
        lines.append(
            f"{what} ({_signed(lost)}) {weight} under random play: an agent may learn "
            f"to avoid {what} before it learns to score"
        )
    return lines


def _describe(source: str) -> str:
    """A reward source (`variables.NAME`, `time`, `events.NAME`) in words."""
    kind, _, name = source.partition(".")
    if kind == "variables":
        return f"losing {name}"
    if kind == "events":
        return f"the {name} event"
    return "the time penalty" if kind == "time" else source


def _signed(value: float) -> str:
    """`value` with its sign and at least one decimal: +1.3, -15.0."""
    text = f"{value:+.4g}"
    return text if "." in text or "e" in text else text + ".0"
