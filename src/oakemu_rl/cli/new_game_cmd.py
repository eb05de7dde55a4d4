"""`oakemu-rl new-game TAPE_OR_SNAPSHOT --out game.yaml`: draft a game YAML by playing it."""

from __future__ import annotations

import argparse
from pathlib import Path

from .arguments import non_negative_int
from .errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "new-game",
        help="draft a game YAML from a snapshot or tape: start, keys, score, lives, routines",
        description="Play the game with random keys to find how it starts, the keys it "
        "reads, its score and lives, its main loop and its crash and game-over routines, and "
        "write a commented game YAML: every guess carries a confidence, and the header lists "
        "what to check by hand. `oakemu-rl inspect` it next.",
    )
    parser.add_argument(
        "source", type=Path, metavar="TAPE_OR_SNAPSHOT", help="a .tap/.tzx tape or a snapshot"
    )
    parser.add_argument("--out", type=Path, required=True, help="the game YAML to write")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed for random play")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..discovery.draft import DraftError, draft_game, write_draft

    out: Path = args.out
    if out.suffix.lower() not in (".yaml", ".yml"):
        raise UsageError(f"--out {out}: expected a .yaml file")
    if out.exists() and not args.force:
        raise UsageError(f"--out {out}: exists; give --force to overwrite it")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: the folder {out.parent} does not exist")
    if not args.source.is_file():
        raise UsageError(f"{args.source}: no such snapshot or tape")
    console = Console()
    try:
        draft = draft_game(args.source, out, seed=args.seed)
    except DraftError as exc:
        raise UsageError(str(exc)) from None
    write_draft(draft, out)
    start = draft.start
    console.print(f"[bold]{draft.name}[/]: wrote {out}")
    console.print(
        f"  start: wait {start.wait}, press {'+'.join(start.keys)} (confidence "
        f"{start.confidence:.2f}), main loop 0x{start.main_loop.address:04X}"
    )
    console.print(f"  actions: {draft.keys.actions}", markup=False)
    for name, guess in (("score", draft.score), ("lives", draft.lives)):
        if guess is None:
            console.print(f"  {name}: not found")
        else:
            var = guess.variable
            console.print(
                f"  {name}: 0x{var.address:04X} {var.type} (confidence {guess.confidence:.2f})"
            )
    for routine in draft.routines[1:]:
        console.print(f"  {routine.yaml_entry()} (confidence {routine.confidence:.2f})")
    console.print(f"next: oakemu-rl inspect {out} --steps 200 --out shots")
    return 0
