"""Can a student on two stacked frames see forest_run's timing? (distill, issue 28)

    python benchmarks/forest_run_timing.py [--episodes 3] [--horizon 12]

An env step of forest_run is 4 frames. Within it the forest scrolls a row every
`scroll_period` frames (4 in sectors 1-3, 3 in 4-6, 2 in 7-8) and the player steers a
column every 2, each on a frame counter of its own (`scroll_timer`, `steer_timer`). The
step's last screen does not show on which of its frames those fell, so two states that
look the same may have different safe moves.

The safety teacher plays from the start (each action drawn from its target) until the
game ends. On every critical state (some action loses a life, another does not) it
labels the state again with the counters set to every other value they can hold (the
benchmark's `distill.hidden`, `HIDDEN` in forest_run.py) and counts, per sector, how often
the safe set changes, how often no move is safe with every value, and how often the move an
imitating student would favour (the one the even targets of all the variants weight most)
is unsafe in the real state. It also times each state's label with and without `hidden`
(the teacher that names only the moves safe whatever the counters hold), and counts the
critical states on which it narrowed the safe set: the time ratio is what the safer labels
cost.
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

from forest_run import HIDDEN
from oakemu_rl.distill.config import DistillSettings
from oakemu_rl.games.loader import load_game
from oakemu_rl.games.session import GameSession
from oakemu_rl.trajectories.teacher import SearchTeacher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=12)
    args = parser.parse_args()
    game = load_game("forest_run")
    settings = DistillSettings(horizon=args.horizon, search="safety")
    plain = SearchTeacher(game, settings.teacher_settings())
    with_hidden = settings.model_copy(update={"hidden": HIDDEN})
    robust = SearchTeacher(game, with_hidden.teacher_settings())
    env = GameSession(game)
    rng = np.random.default_rng(1)
    by_sector: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    seconds = {"plain": 0.0, "hidden": 0.0}
    labels = 0
    for episode in range(args.episodes):
        env.reset(3000 + episode)
        while True:
            state = env.save_state()
            tally = by_sector[int(env.values["sector"])]
            started = time.perf_counter()
            label = plain.label(state)
            seconds["plain"] += time.perf_counter() - started
            started = time.perf_counter()
            safer = robust.label(state)
            seconds["hidden"] += time.perf_counter() - started
            labels += 1
            tally["states"] += 1
            real = label.safe
            if not real.all():
                tally["critical"] += 1
                variants = [plain.label(v).safe for v in robust.hidden_variants(state)]
                tally["safe set changes"] += any(bool((v != real).any()) for v in variants)
                tally["a safe move unsafe with other values"] += any(
                    bool((real & ~v).any() and (real & v).any()) for v in variants
                )
                tally["no move always safe"] += not np.logical_and.reduce([real, *variants]).any()
                favoured = int(np.argmax(sum(v / v.sum() for v in [real, *variants])))
                tally["favoured move unsafe"] += not real[favoured]
                tally["hidden label narrower"] += bool((safer.safe != real).any())
            step = env.step(int(rng.choice(len(label.target), p=label.target)))
            if step.outcome in ("win", "loss", "truncated"):
                break
        print(
            f"episode {episode + 1}/{args.episodes}: {step.outcome}, sector {env.values['sector']}",
            flush=True,
        )
    print("per sector (critical states: some move loses a life, another does not):")
    for sector, tally in sorted(by_sector.items()):
        print(f"  sector {sector}: " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    total = sum(by_sector.values(), collections.Counter())
    critical = max(1, total["critical"])
    print(
        f"all: {total['critical']} critical states of {total['states']}; the safe set changes "
        f"with the hidden counters on {total['safe set changes'] / critical:.0%}, no move is "
        f"safe with every value on {total['no move always safe']}, the favoured move is unsafe "
        f"on {total['favoured move unsafe']}"
    )
    print(
        f"label time: plain {seconds['plain'] / labels * 1000:.0f} ms, with hidden "
        f"{seconds['hidden'] / labels * 1000:.0f} ms a state ({labels} states): ratio "
        f"{seconds['hidden'] / seconds['plain']:.2f}"
    )


if __name__ == "__main__":
    main()
