"""`oakemu-rl memory GAME`: search a game's RAM for its variables, as with a RAM-search tool."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from .errors import UsageError

if TYPE_CHECKING:
    from ..discovery.memory_search import Candidate, Constraint, RamRecording


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "memory",
        help="search a game's RAM for a variable (score, lives, ...) and print data: entries",
        description="Play the game (random actions from --seed) and record its RAM after every "
        "step, then keep the addresses whose value, read as any data: type (byte, "
        "signed_byte, word, word_be, bcd of 1-3 bytes, number_string of 1-6 digits), obeys "
        "every constraint given. With none, look for the score and the lives (the numbers on "
        "screen labelled SCORE and LIVES, else a value that only rises and a small one that "
        "falls by one). The game YAML's own data: section is not used.",
    )
    parser.add_argument(
        "game", help="bundled game name, path to a game YAML, or a snapshot or tape"
    )
    parser.add_argument("--steps", type=_positive, default=600, help="steps to record (600)")
    parser.add_argument("--seed", type=_non_negative, default=0, help="seed of the play (0)")
    parser.add_argument(
        "--episode-steps",
        type=_positive,
        default=200,
        metavar="N",
        help="reset the game after N steps (200)",
    )
    parser.add_argument(
        "--equals",
        action="append",
        default=[],
        metavar="V@K",
        help="equals V at step K (0 or 'start': after the start; -1 or 'end': the last step); "
        "V alone means at the start; repeatable",
    )
    parser.add_argument(
        "--changed-by",
        action="append",
        default=[],
        metavar="D@K,K...",
        help="changed by D into each of the steps K (a negative D needs '=': "
        "--changed-by=-1@57,120); repeatable",
    )
    parser.add_argument(
        "--screen",
        action="append",
        default=[],
        metavar="LABEL",
        help="equals the number on screen labelled LABEL at every step that shows it",
    )
    parser.add_argument(
        "--rises-with",
        action="append",
        default=[],
        metavar="NAME",
        help="rose whenever NAME rose: a variable of the game YAML's data: section or an "
        "on-screen label",
    )
    parser.add_argument(
        "--name", default="variable", help="the name written in the data: entries (variable)"
    )
    parser.add_argument("--top", type=_positive, default=10, help="candidates to print (10)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(handler=run)


def _positive(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _non_negative(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of 0 or more, got {text!r}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _step(text: str, option: str, whole: str) -> int:
    named = {"start": 0, "end": -1}
    if text.strip().lower() in named:
        return named[text.strip().lower()]
    try:
        return int(text, 0)
    except ValueError:
        raise UsageError(
            f"{option} {whole}: step {text!r} is not a whole number, 'start' or 'end'"
        ) from None


def _value(text: str, option: str, whole: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise UsageError(
            f"{option} {whole}: {text!r} is not a whole number (such as 3, -1 or 0x10)"
        ) from None


def parse_equals(text: str) -> tuple[int, int]:
    """'V@K' (or 'V') as (value, step)."""
    value, _, step = text.partition("@")
    return _value(value, "--equals", text), _step(step, "--equals", text) if step else 0


def parse_changed_by(text: str) -> tuple[int, list[int]]:
    """'D@K,K...' as (delta, steps)."""
    delta, sep, steps = text.partition("@")
    if not sep or not steps.strip():
        raise UsageError(f"--changed-by {text}: expected D@K,K... such as -1@57,120")
    return _value(delta, "--changed-by", text), [
        _step(s, "--changed-by", text) for s in steps.split(",") if s.strip()
    ]


def run(args: argparse.Namespace) -> int:
    from ..discovery.memory_search import (
        ChangedBy,
        Equals,
        EqualsScreen,
        RisesWith,
        find_score_and_lives,
        find_variables,
        load_search_game,
        record_ram,
    )

    game = load_search_game(args.game)
    equals = [parse_equals(t) for t in args.equals]
    changed = [parse_changed_by(t) for t in args.changed_by]
    data = game.spec.data
    screen = bool(args.screen) or any(name not in data for name in args.rises_with)
    recording = record_ram(
        game,
        steps=args.steps,
        seed=args.seed,
        episode_steps=args.episode_steps,
        screen=screen or not (equals or changed or args.rises_with),
    )
    header = {
        "game": game.name,
        "steps": recording.rows - recording.episodes,
        "episodes": recording.episodes,
        "ram": [recording.base, recording.end - 1],
    }
    constraints: list[Constraint] = [Equals(v, k) for v, k in equals]
    constraints += [ChangedBy(d, ks) for d, ks in changed]
    constraints += [EqualsScreen(label) for label in args.screen]
    for name in args.rises_with:
        constraints.append(RisesWith(_reference(recording, name, data), name=name))
    try:
        if not constraints:
            found = find_score_and_lives(recording=recording, limit=args.top)
            results = {
                "score": (found.score_route, found.score),
                "lives": (found.lives_route, found.lives),
            }
        else:
            what = "; ".join(c.describe() for c in constraints)
            results = {args.name: (what, find_variables(recording, constraints, limit=args.top))}
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    if args.json:
        print(json.dumps({**header, "results": _as_json(results)}, indent=2))
        return 0
    print(
        f"{game.name}: {header['steps']} steps in {recording.episodes} episode(s), RAM "
        f"0x{recording.base:04X}-0x{recording.end - 1:04X} searched"
    )
    for name, (route, candidates) in results.items():
        print(f"\n{name}: {route}")
        if not candidates:
            print("  no address fits")
        for candidate in candidates:
            print(f"  {candidate.score:4.2f}  {candidate.yaml_entry(name)}")
            print(f"        {candidate.description}")
    return 0


def _reference(recording: RamRecording, name: str, data: dict[str, Any]) -> Any:
    """The series of a data: variable of the game YAML, or of an on-screen label."""
    if name in data:
        variable = data[name]
        try:
            return recording.decode(variable.address, variable.type, variable.length)
        except ValueError as exc:
            raise UsageError(f"--rises-with {name}: {exc}") from None
    values, present, _ = recording.screen_series(name)
    if not present.any():
        labels = ", ".join(sorted(recording.screen_labels())) or "none"
        known = ", ".join(data) or "none"
        raise UsageError(
            f"--rises-with {name}: not a data: variable of the game ({known}) nor a label "
            f"on its screen ({labels})"
        )
    return values


def _as_json(results: dict[str, tuple[str, list[Candidate]]]) -> dict[str, Any]:
    return {
        name: {
            "route": route,
            "candidates": [{"yaml": c.yaml_entry(name), **c.to_dict()} for c in candidates],
        }
        for name, (route, candidates) in results.items()
    }
