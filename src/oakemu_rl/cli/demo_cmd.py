"""`oakemu-rl demo`: winning demonstrations by search, with no learning."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from .arguments import non_negative_int, positive_int


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "demo",
        help="play a game by lookahead search and save the episodes as demonstrations",
        description="Play GAME by beam search over its actions, using the emulator's save "
        "and restore and nothing but the game YAML (reward, win and loss conditions, "
        "lives). Each episode is written to OUT as a trajectory file, for "
        "`oakemu-rl train --demos OUT`.",
    )
    parser.add_argument("game", help="bundled game name or game YAML path")
    parser.add_argument("--out", type=Path, required=True, help="directory for the files")
    parser.add_argument("--episodes", type=positive_int, default=10, help="episodes to play")
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="draws the episodes' start seeds"
    )
    parser.add_argument(
        "--beam", type=positive_int, default=8, help="machine states kept after each move"
    )
    parser.add_argument(
        "--hold", type=positive_int, default=2, help="agent steps each searched move lasts"
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="episodes searched at once (default: the CPU cores)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(handler=run)


def _play(game: str, beam: int, hold: int, seed: int, out: str, index: int) -> dict[str, Any]:
    from ..games.loader import load_game
    from ..trajectories.search import SearchDemonstrator, SearchSettings

    demonstrator = SearchDemonstrator(
        load_game(game), SearchSettings(beam=beam, hold=hold), seed=seed
    )
    result = demonstrator.play(seed)
    trajectory = result.trajectory
    path = Path(out) / f"demo-{index:03d}-seed{seed}.trajectory.json"
    trajectory.save(path)
    return {
        "file": str(path),
        "seed": seed,
        "outcome": trajectory.outcome,
        "return": trajectory.episode_return,
        "score": trajectory.score,
        "length": trajectory.length,
        "lives_lost": trajectory.lives_lost,
        "seconds": result.seconds,
        "simulated_steps": result.simulated_steps,
    }


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from ..games.loader import load_game
    from ..runtime.progress import progress_bar

    game = load_game(args.game)  # a wrong game fails before any search starts
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in np.random.default_rng(args.seed).integers(1, 2**31 - 1, args.episodes)]
    workers = min(args.workers or os.cpu_count() or 1, args.episodes)
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    show = not args.json
    context = multiprocessing.get_context("spawn")
    with (
        ProcessPoolExecutor(workers, mp_context=context) as pool,
        progress_bar(args.episodes, f"searching {game.key}", show) as advance,
    ):
        futures = [
            pool.submit(_play, str(game.path), args.beam, args.hold, seed, str(args.out), i)
            for i, seed in enumerate(seeds)
        ]
        for future in as_completed(futures):
            result = future.result()
            results.append(result)
            advance(1)
            if show:
                print(
                    f"seed {result['seed']:>10}: {result['outcome'] or 'open':>9}, score "
                    f"{result['score']:g}, {result['length']} steps, "
                    f"{result['lives_lost']} lives lost, {result['seconds']:.0f} s",
                    flush=True,
                )
    wall = time.monotonic() - started
    wins = [r for r in results if r["outcome"] == "win"]
    summary = {
        "game": game.key,
        "episodes": len(results),
        "wins": len(wins),
        "win_rate": len(wins) / len(results),
        "clean_wins": sum(r["lives_lost"] == 0 for r in wins),
        "seconds_per_demo": float(np.mean([r["seconds"] for r in results])),
        "wall_seconds": wall,
        "out": str(args.out),
        "episodes_detail": sorted(results, key=lambda r: r["file"]),
    }
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        print(
            f"{game.key}: won {summary['wins']} of {summary['episodes']} "
            f"({summary['win_rate']:.0%}; {summary['clean_wins']} with no life lost), "
            f"{summary['seconds_per_demo']:.1f} s per demonstration, {wall:.0f} s in all "
            f"on {workers} worker(s); files in {args.out}"
        )
    return 0
