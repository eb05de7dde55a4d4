"""How well does the distill teacher itself play? Whole games, one per horizon setting.

    python benchmarks/teacher_play.py [GAME] [--search safety] [--horizons 12 24]
        [--budget 2000] [--prune state|situation] [--games 8] [--workers 2] [--seed 5000]

A distilled student can at best play as its teacher: where the teacher's lookahead is too
short to see a trap (every move survives `horizon` steps, none survives the ones after),
its labels lead into it, and a student that imitates them perfectly still loses the life.
The teacher (`distill.search`, `distill.horizon`, `distill.verify_budget`, `distill.prune`)
plays `--games` games of GAME (default forest_run) from the fresh starts of seeds `--seed`
on, each action drawn from its target as `distill` draws it while beta lets the teacher
act; games run in `--workers` processes.
For each horizon it prints the share of games won and won with no life lost, the lives
lost a game, how many of those followed a state on which the teacher already saw no safe
move (a trap entered earlier, or a search cut short by `--budget`, counted apart), and a
label's milliseconds and emulator steps, with the cost against the first horizon's.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from oakemu_rl.distill.config import DistillSettings
from oakemu_rl.games.loader import load_game
from oakemu_rl.games.session import GameSession
from oakemu_rl.trajectories.teacher import SearchTeacher


@dataclass
class Game:
    outcome: str
    lives_lost: int
    trapped: int
    """Lives lost right after a label that found no move safe."""
    cut_short: int
    """... of them, after a label whose search ran out of `verify_budget` steps."""
    labels: int
    seconds: float
    simulated_steps: int


def play(game_name: str, settings: DistillSettings, seed: int) -> Game:
    """One game of `game_name` played by the teacher from the fresh start of `seed`."""
    game = load_game(game_name)
    teacher = SearchTeacher(game, settings.teacher_settings())
    session = GameSession(game)
    rng = np.random.default_rng(seed)
    session.reset(seed)
    lives = session.values.get("lives")
    lost = trapped = cut_short = labels = 0
    budget = settings.verify_budget
    seconds = 0.0
    while True:
        started = time.perf_counter()
        label = teacher.label(session.save_state(), labels)  # as training labels: by step
        seconds += time.perf_counter() - started
        labels += 1
        step = session.step(int(rng.choice(len(label.target), p=label.target)))
        now = step.values.get("lives")
        if lives is not None and now is not None and now < lives:
            lost += lives - now
            if label.lives_lost.min() > 0:
                trapped += lives - now
                # The held steps come first; the searches share the budget after them.
                cut_short += (lives - now) * (label.simulated_steps >= budget)
        lives = now
        if step.outcome is not None:
            if step.outcome == "loss" and lives is None:
                lost += 1
            return Game(
                step.outcome, lost, trapped, cut_short, labels, seconds, teacher.simulated_steps
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("game", nargs="?", default="forest_run")
    parser.add_argument("--search", choices=["safety", "margin", "beam"], default="safety")
    parser.add_argument("--horizons", type=int, nargs="+", default=[12, 24])
    parser.add_argument("--budget", type=int, default=2_000, help="distill.verify_budget")
    parser.add_argument("--prune", choices=["state", "situation"], default="state")
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=5_000)
    args = parser.parse_args()
    base_ms: float | None = None
    with ProcessPoolExecutor(args.workers) as pool:
        for horizon in args.horizons:
            settings = DistillSettings(
                search=args.search, horizon=horizon, verify_budget=args.budget, prune=args.prune
            )
            started = time.monotonic()
            games = list(
                pool.map(
                    play,
                    [args.game] * args.games,
                    [settings] * args.games,
                    range(args.seed, args.seed + args.games),
                )
            )
            labels = sum(g.labels for g in games)
            ms = 1000 * sum(g.seconds for g in games) / labels
            steps = sum(g.simulated_steps for g in games) / labels
            base_ms = base_ms or ms
            won = sum(g.outcome == "win" for g in games)
            clean = sum(g.outcome == "win" and g.lives_lost == 0 for g in games)
            lost = sum(g.lives_lost for g in games)
            print(
                f"{args.search} teacher, horizon {horizon}, budget {args.budget}, prune "
                f"{args.prune}: "
                f"{args.games} games ({time.monotonic() - started:.0f} s), won {won} "
                f"({won / args.games:.0%}), {clean} with no life lost ({clean / args.games:.0%}); "
                f"{lost / args.games:.2f} lives lost a game, {sum(g.trapped for g in games)} of "
                f"the {lost} after a state with no safe move "
                f"({sum(g.cut_short for g in games)} with the search cut short by the budget); "
                f"{ms:.0f} ms and {steps:.0f} emulator steps a label "
                f"({ms / base_ms:.2f}x the first horizon's)",
                flush=True,
            )


if __name__ == "__main__":
    main()
