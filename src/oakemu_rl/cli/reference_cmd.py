"""`oakemu-rl reference`: a game's random and search scores, the yardstick of normalised scores."""

from __future__ import annotations

import argparse
from pathlib import Path

from .arguments import non_negative_int, positive_int


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "reference",
        help="measure a game's random-play and search scores (for normalised scores)",
        description="Play RANDOM_EPISODES episodes of random play and EPISODES of the "
        "search demonstrator (`oakemu-rl demo`'s beam search) from fresh starts (the "
        "search's are random play's first), and cache their mean scores under the SHA-256 "
        "of the game's YAML. `evaluate` then prints an agent's "
        "normalised score, (agent - random) / (search - random). Editing the YAML makes "
        "the cached reference stale.",
    )
    parser.add_argument("game", help="bundled game name or game YAML path")
    parser.add_argument(
        "--episodes", type=positive_int, default=3, help="episodes of the search (default 3)"
    )
    parser.add_argument(
        "--random-episodes",
        type=positive_int,
        default=30,
        help="episodes of random play (default 30: one is cheap, and their scores vary)",
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="draws the episodes' start seeds"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where references are cached (default: $OAKEMU_RL_CACHE, else ~/.cache/oakemu-rl)",
    )
    parser.add_argument(
        "--refresh", action="store_true", help="compute it again even when it is cached"
    )
    parser.add_argument("--json", action="store_true", help="print the reference as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..games.loader import load_game
    from ..runtime.progress import progress_bar
    from ..trajectories.reference import reference_for

    game = load_game(args.game)
    total = args.episodes + args.random_episodes
    with progress_bar(total, f"reference of {game.key}", not args.json) as advance:
        reference, cached = reference_for(
            game,
            args.episodes,
            random_episodes=args.random_episodes,
            seed=args.seed,
            cache_dir=args.cache_dir,
            refresh=args.refresh,
            progress=advance,
        )
    if args.json:
        print(reference.to_json())
        return 0
    source = "cached" if cached else f"measured in {reference.seconds:.0f} s"
    print(
        f"{game.key}: random play scores {reference.random_score:g}, the search "
        f"{reference.search_score:g} (won {reference.search_wins} of {reference.episodes}); "
        f"{reference.random_episodes} and {reference.episodes} episodes, seed "
        f"{reference.seed}, {source}"
    )
    return 0
