"""The defaults on every bundled game: random play, DQN, PPO and distill, several seeds.

    python benchmarks/generality.py [--steps 60000 | --minutes 30] [--seeds 0 1 2]
                                    [--episodes 30] [--games star_guard ...]
                                    [--algos dqn ppo distill sb3_dqn sb3_ppo] [--out DIR]
                                    [--normalise] [--peers-side-by-side]

For every bundled game (given by its YAML path, so no preset applies) and seed, each
algorithm trains with the package's defaults for `--steps` env steps, or with `--minutes`
for that much wall clock (`train --minutes`: the budget a user has; distill, whose every
step is a search, takes only a wall-clock budget); `sb3_dqn` and `sb3_ppo` are
Stable-Baselines3 with RL Zoo's Atari settings on the same games and minutes
(`sb3_zoo.py`), played from their final model; each of our runs' best
checkpoint (by the lower bound of its evaluations' 95% interval) plays `--episodes`
greedy games; random play is the same evaluation with uniformly random actions
(`training_runs.py`). The table gives, per game and column, each seed's mean return with
its 95% interval and the mean game score; the test-set games (those the defaults were not
chosen on, see `defaults_sweep.py`) are marked, and the target is checked: on each of
them, the trained greedy mean score at least 2x random's on every seed.

The agents of the first seed are evaluated twice, with two env seeds: it counts those
whose two mean returns each lie in the other evaluation's 95% interval, which is what the
default number of evaluation episodes is chosen for.

With `--normalise`, each agent's mean score is also given as a normalised score,
(agent - random) / (search - random), from the game's reference (`oakemu-rl reference`,
computed and cached when missing), and each algorithm's interquartile mean over the
test set's games and seeds comes with a stratified bootstrap 95% interval (rliable's
protocol, Agarwal et al. 2021). The target is then checked: the better of our algorithms
(by that IQM) reaches a mean normalised score of at least 0.25 on each test-set game, and
its IQM is above every SB3 column's.

SB3 runs in one process on one thread, as RL Zoo does, so a run alone leaves a second core
idle. With `--peers-side-by-side` the two SB3 columns of a game and seed train at the same
time, each on a core of its own: half the wall clock, at a cost (on the 2-core machine of
docs/defaults.md each reached 85-91% of the steps it reaches alone; the table gives the
steps each run reached).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import sb3_zoo
from oakemu_rl.games.loader import bundled_games, load_game
from oakemu_rl.runtime.statistics import stratified_bootstrap_ci
from oakemu_rl.trajectories.reference import reference_for
from training_runs import TRAINING_SET, Evaluation, evaluate, test_set, train

OURS = ("dqn", "ppo", "distill")
PEERS = ("sb3_dqn", "sb3_ppo")
"""Stable-Baselines3 with RL Zoo's Atari settings (`sb3_zoo.py`)."""
ALGOS = OURS + PEERS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60_000)
    parser.add_argument("--minutes", type=float, help="a wall-clock budget per run instead")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=30, help="greedy episodes per agent")
    parser.add_argument("--games", nargs="+", choices=sorted(bundled_games()))
    parser.add_argument("--algos", nargs="+", choices=ALGOS, default=["dqn", "ppo"])
    parser.add_argument("--out", type=Path, default=Path("benchmark-runs/defaults"))
    parser.add_argument(
        "--normalise",
        action="store_true",
        help="normalised scores from each game's reference, and the IQM over the test set",
    )
    parser.add_argument(
        "--reference-episodes", type=int, default=3, help="episodes of each reference"
    )
    parser.add_argument(
        "--peers-side-by-side",
        action="store_true",
        help="train the two SB3 columns of a game and seed at the same time, each on a core "
        "of its own (SB3 runs on one thread): half the wall clock, 9-15%% fewer steps each",
    )
    args = parser.parse_args()
    if args.peers_side_by_side and not set(PEERS) <= set(args.algos):
        parser.error("--peers-side-by-side: name both sb3_dqn and sb3_ppo in --algos")
    timed = [a for a in args.algos if a == "distill" or a in PEERS]
    if timed and args.minutes is None:
        parser.error(f"--algos {' '.join(timed)}: give a wall-clock budget (--minutes); a "
                     "distill step is a search, and SB3 runs are compared on time")  # fmt: skip
    ours = [a for a in args.algos if a in OURS]
    if not ours:
        parser.error("--algos: name one of dqn, ppo, distill too (random play is evaluated "
                     "through its runs)")  # fmt: skip
    games = args.games or [*test_set(), *TRAINING_SET]

    table: dict[tuple[str, str], list[Evaluation]] = {}
    steps: dict[tuple[str, str], list[int]] = {}
    agree = total = 0
    for seed in args.seeds:  # every game on one seed first: a partial table is a useful one
        for game in games:
            if args.peers_side_by_side:
                assert args.minutes is not None
                sb3_zoo.train_side_by_side(args.out, game, seed, args.minutes, args.episodes)
            for algo in args.algos:
                if algo in PEERS:
                    assert args.minutes is not None
                    run_dir, summary = sb3_zoo.train(args.out, algo[4:], game, seed, args.minutes)
                else:
                    settings = {"algo": algo}
                    run_dir, summary = train(
                        args.out, settings, game, seed, args.steps, minutes=args.minutes
                    )
                steps.setdefault((game, algo), []).append(int(summary["steps"]))
                first = play(algo, run_dir, game, args.episodes, 1000 + seed)
                table.setdefault((game, algo), []).append(first)
                if seed == args.seeds[0]:
                    second = play(algo, run_dir, game, args.episodes, 2000 + seed)
                    total += 1
                    agree += inside(first, second) and inside(second, first)
                if algo == ours[0]:
                    random = evaluate(run_dir, args.episodes, seed=1000 + seed, random=True)
                    table.setdefault((game, "random"), []).append(random)
            print_table(args, games, table, steps)
    if args.normalise:
        print_normalised(args, games, table)
    print(f"two evaluations of the same agent ({args.episodes} episodes each, two env seeds) "
          f"agree within each other's 95% interval for {agree} of {total} agents")  # fmt: skip


def play(algo: str, run_dir: Path, game: str, episodes: int, env_seed: int) -> Evaluation:
    """The run's greedy games: ours from its best checkpoint, a peer's from its model."""
    if algo in PEERS:
        return sb3_zoo.evaluate(run_dir, game, episodes, env_seed)
    return evaluate(run_dir, episodes, seed=env_seed)


def inside(a: Evaluation, b: Evaluation) -> bool:
    """Whether a's mean lies in b's 95% interval."""
    return b.ci95_low <= a.mean_return <= b.ci95_high


def print_table(
    args: argparse.Namespace,
    games: list[str],
    table: dict[tuple[str, str], list[Evaluation]],
    steps: dict[tuple[str, str], list[int]],
) -> None:
    budget = f"{args.minutes:g} minutes" if args.minutes else f"{args.steps:,} env steps"
    reached = " and the mean env steps reached" if args.minutes else ""
    print(f"\nDefaults on every bundled game: {budget}, seeds {args.seeds}, "
          f"{args.episodes} greedy episodes of each best checkpoint; mean return [95% CI] "
          f"per seed, then the mean score over seeds{reached}")  # fmt: skip
    header = ["game", "random", *(f"{a} defaults" for a in args.algos), "target: 2x random"]
    rows = []
    for game in games:
        if (game, "random") not in table:
            continue
        cells = []
        for column in ("random", *args.algos):
            results = table.get((game, column), [])
            runs = "; ".join(r.interval() for r in results)
            score = sum(r.mean_score for r in results) / max(len(results), 1)
            counts = steps.get((game, column))
            more = f", {sum(counts) / len(counts):,.0f} steps" if counts and args.minutes else ""
            cells.append(f"{runs} (score {score:.1f}{more})" if results else "-")
        verdict = "(training set)"
        if game not in TRAINING_SET:
            verdict = " ".join(f"{a.upper()} {check(table, game, a)}" for a in args.algos)
        rows.append([game + ("" if game in TRAINING_SET else " *"), *cells, verdict])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    print("* test set: no default was chosen on it")


def print_normalised(
    args: argparse.Namespace, games: list[str], table: dict[tuple[str, str], list[Evaluation]]
) -> None:
    """Per game and algorithm the mean normalised score over seeds; per algorithm the IQM
    over the test set's games and seeds, with its stratified bootstrap 95% interval."""
    print("\nNormalised scores, (agent - random) / (search - random), mean over seeds")
    normalised: dict[str, dict[str, Sequence[float]]] = {algo: {} for algo in args.algos}
    for game in games:
        reference, _ = reference_for(load_game(game), args.reference_episodes)
        cells = []
        for algo in args.algos:
            results = table.get((game, algo), [])
            values = [reference.normalise(r.mean_score) for r in results]
            if game not in TRAINING_SET and values:
                normalised[algo][game] = values
            cells.append(f"{algo.upper()} {sum(values) / len(values):.3f}" if values else "-")
        print(
            f"  {game:<12} random {reference.random_score:g}, search "
            f"{reference.search_score:g}: {', '.join(cells)}"
        )
    iqm: dict[str, float] = {}
    for algo, scores in normalised.items():
        if scores:
            point, low, high = stratified_bootstrap_ci(scores)
            iqm[algo] = point
            print(f"  {algo.upper()} IQM over the test set: {point:.3f} [{low:.3f}, {high:.3f}]")
    print_target(normalised, iqm, len(args.seeds))


TARGET = 0.25
"""The mean normalised score the better default algorithm reaches on each test-set game."""


def print_target(
    normalised: dict[str, dict[str, Sequence[float]]], iqm: dict[str, float], seeds: int
) -> None:
    """The target, checked: the better of our algorithms (by IQM over the test set) has a
    mean normalised score of at least `TARGET` on each test-set game, and an IQM above
    every SB3 column's; 'so far' while a test-set game or seed is still to be measured."""
    ours = [algo for algo in iqm if algo in OURS]
    if not ours:
        return
    best = max(ours, key=lambda algo: iqm[algo])
    complete = all(len(normalised[best].get(game, [])) == seeds for game in test_set())
    per_game = {game: sum(v) / len(v) for game, v in normalised[best].items()}
    low = sorted(game for game, mean in per_game.items() if mean < TARGET)
    peers = {algo: iqm[algo] for algo in iqm if algo in PEERS}
    above_peers = all(iqm[best] > value for value in peers.values())
    met = complete and not low and bool(peers) and above_peers
    print(f"  better default algorithm: {best.upper()} (IQM {iqm[best]:.3f})")
    print(f"  each test-set game >= {TARGET}: " + ("yes" if not low else f"no ({', '.join(low)})"))
    if peers:
        print(f"  IQM above SB3's ({', '.join(f'{a} {v:.3f}' for a, v in peers.items())}): "
              + ("yes" if above_peers else "no"))  # fmt: skip
    else:
        print("  IQM above SB3's: not measured (--algos sb3_dqn sb3_ppo)")
    print(f"  target: {'met' if met else 'not met'}" + ("" if complete else " (so far)"))


def check(table: dict[tuple[str, str], list[Evaluation]], game: str, algo: str) -> str:
    """'3/3': on how many seeds the agent's mean score is at least 2x random's."""
    randoms, agents = table[(game, "random")], table.get((game, algo), [])
    passed = sum(a.mean_score >= 2 * r.mean_score for a, r in zip(agents, randoms, strict=False))
    return f"{passed}/{len(agents)}"


if __name__ == "__main__":
    main()
