"""Does the teacher's memo, carried over an episode's labels, pay? With and without it.

    python benchmarks/teacher_memo.py [GAME] [--search safety] [--horizon 16]
        [--budget 2000] [--prune situation] [--games 2] [--workers 2] [--seed 7000]
        [--by sector]

A distill run labels every state of its episodes, one after the other. The teacher's
depth-first searches learn on the way which states fail and which paths survive; given
each state's step in its episode (`SearchTeacher.label(state, step)`, as training's
`TeacherLabels` does), it keeps both for the next labels, which skip the failures and
extend the paths instead of searching again. This plays `--games` games of GAME (default
forest_run) from the fresh starts of seeds `--seed` on, each move drawn from the target of
a teacher that searches every label afresh (as distill draws the teacher's moves), and
labels every state twice, interleaved in one process: by that teacher and by one that
carries its memo. Prints, for each value of the YAML variable `--by` (or for all states),
the labels, the critical ones (some move loses a life, another does not), each teacher's
emulator steps and milliseconds a label with their ratio, and the states whose safe sets
differ (with a search cut short by `--budget` they may: the memo finds more within it;
with `--prune state` and a budget no search runs out of, they must not).
"""

from __future__ import annotations

import argparse
import collections
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from oakemu_rl.distill.config import DistillSettings
from oakemu_rl.games.loader import load_game
from oakemu_rl.games.session import GameSession
from oakemu_rl.trajectories.teacher import SearchTeacher

Tally = dict[str, collections.defaultdict[str, float]]
"""Counts and seconds, by the value of `--by`."""


def play(game_name: str, settings: DistillSettings, seed: int, by: str | None) -> Tally:
    """One game of `game_name` from the fresh start of `seed`, every state labelled by a
    carrying and a fresh teacher; the counts by the value of `by`."""
    game = load_game(game_name)
    carrying = SearchTeacher(game, settings.teacher_settings())
    fresh = SearchTeacher(game, settings.teacher_settings())
    session = GameSession(game)
    rng = np.random.default_rng(seed)
    session.reset(seed)
    tally: Tally = collections.defaultdict(lambda: collections.defaultdict(float))
    for step in range(game.spec.max_episode_steps or 10**6):
        state = session.save_state()
        counts = tally[str(session.values[by]) if by else "all"]
        started = time.perf_counter()
        carried = carrying.label(state, step)
        middle = time.perf_counter()
        afresh = fresh.label(state)
        counts["carrying_s"] += middle - started
        counts["fresh_s"] += time.perf_counter() - middle
        counts["labels"] += 1
        counts["critical"] += not afresh.safe.all()
        counts["carrying_steps"] += carried.simulated_steps
        counts["fresh_steps"] += afresh.simulated_steps
        counts["carrying_safer"] += int((carried.lives_lost < afresh.lives_lost).any())
        counts["fresh_safer"] += int((afresh.lives_lost < carried.lives_lost).any())
        action = int(rng.choice(len(afresh.target), p=afresh.target))
        if session.step(action).outcome is not None:
            break
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("game", nargs="?", default="forest_run")
    parser.add_argument("--search", choices=["safety", "margin", "beam"], default="safety")
    parser.add_argument("--horizon", type=int, default=16)
    parser.add_argument("--budget", type=int, default=2_000, help="distill.verify_budget")
    parser.add_argument("--prune", choices=["state", "situation"], default="situation")
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7_000)
    parser.add_argument("--by", help="a YAML variable to break the counts down by (sector)")
    args = parser.parse_args()
    settings = DistillSettings(
        search=args.search, horizon=args.horizon, verify_budget=args.budget, prune=args.prune
    )
    started = time.monotonic()
    with ProcessPoolExecutor(args.workers) as pool:
        tallies = list(
            pool.map(
                play,
                [args.game] * args.games,
                [settings] * args.games,
                range(args.seed, args.seed + args.games),
                [args.by] * args.games,
            )
        )
    print(
        f"{args.game}: {args.search} teacher, horizon {args.horizon}, budget {args.budget}, "
        f"prune {args.prune}; {args.games} games from seed {args.seed} "
        f"({time.monotonic() - started:.0f} s)"
    )
    merged: Tally = collections.defaultdict(lambda: collections.defaultdict(float))
    for tally in tallies:
        for group, counts in tally.items():
            for total in (merged[group], merged["all"]) if args.by else (merged[group],):
                for name, value in counts.items():
                    total[name] += value
    groups = sorted((g for g in merged if g != "all"), key=lambda g: (len(g), g))
    print(
        f"{args.by or '':>8} {'labels':>7} {'critical':>8} | {'steps a label':>21} "
        f"{'ratio':>6} | {'ms a label':>15} {'ratio':>6} | safe sets differ"
    )
    print(
        f"{'':>8} {'':>7} {'':>8} | {'fresh':>10} {'carrying':>10} {'':>6} | "
        f"{'fresh':>7} {'carrying':>7}"
    )
    for group in [*groups, "all"]:
        c = merged[group]
        labels = c["labels"]
        fresh_steps, carrying_steps = c["fresh_steps"] / labels, c["carrying_steps"] / labels
        fresh_ms, carrying_ms = 1e3 * c["fresh_s"] / labels, 1e3 * c["carrying_s"] / labels
        print(
            f"{group:>8} {labels:>7,.0f} {c['critical']:>8,.0f} | {fresh_steps:>10.0f} "
            f"{carrying_steps:>10.0f} {fresh_steps / carrying_steps:>5.2f}x | {fresh_ms:>7.1f} "
            f"{carrying_ms:>7.1f} {fresh_ms / carrying_ms:>5.2f}x | "
            f"{c['carrying_safer'] + c['fresh_safer']:.0f} ({c['carrying_safer']:.0f} safer with "
            f"the memo, {c['fresh_safer']:.0f} without)",
            flush=True,
        )


if __name__ == "__main__":
    main()
