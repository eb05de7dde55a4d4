"""Choose the defaults for games without a preset by a sweep on the training set.

    python benchmarks/defaults_sweep.py [--steps 60000 | --minutes 30] [--seeds 0] [--episodes 30]
                                        [--only dqn/auto ...] [--games forest_run]
                                        [--out DIR]

Every candidate configuration trains on each training-set game (`catch`, `forest_run`,
`key_hunt`, `deep_dive`, given by their YAML paths, so presets do not apply) for the same
env steps (or, with `--minutes`, the same wall clock: distill's candidates take only
that), and its best checkpoint plays greedy episodes (`training_runs.py`). Games differ in scale,
so each game's returns are normalised: 0 is random play, 1 is the best candidate of
the same algorithm on that game. The candidate of each algorithm with the highest mean
normalised return is the default. The test-set games (every other bundled game) are
never used here; `generality.py` reports the chosen defaults on them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from training_runs import SEARCH_DEMOS, TRAINING_SET, Evaluation, evaluate, train

SCREEN_32 = {"observation": {"type": "screen", "height": 32, "width": 32, "frame_stack": 2}}
AUTO = {"observation": {"type": "auto", "frame_stack": 2}}
GO_EXPLORE: dict[str, Any] = {
    "reward_shaping": [{"type": "novelty", "cell": "variables"}],
    "restart_pool": {
        "enabled": True,
        "priority": "novelty",
        "save_every_steps": 50,
        "restart_probability": 0.5,
    },
}
"""A novelty bonus on Go-Explore's cells, and half the episodes restarted from the rarest."""
CANDIDATES: dict[str, dict[str, Any]] = {
    "dqn/screen32": {"algo": "dqn", "env": SCREEN_32},
    "dqn/auto": {"algo": "dqn", "env": AUTO},
    "ppo/screen32": {"algo": "ppo", "env": SCREEN_32},
    "ppo/auto": {"algo": "ppo", "env": AUTO},
    "ppo/auto-lr1e-3": {
        "algo": "ppo",
        "env": AUTO,
        "ppo": {"learning_rate": 1e-3, "rollout_steps": 64, "epochs": 8},
    },
    # Rewards clipped to [-1, 1], as DQN on Atari does: a game YAML's reward scale (a life
    # worth 5 or 10 pickups) then no longer decides what the agent learns first.
    "dqn/auto-clip": {"algo": "dqn", "env": AUTO, "reward_shaping": [{"type": "clip"}]},
    # Data-efficient DQN, as the Atari-100k methods set it (DER, DrQ-epsilon): rewards
    # credited 10 steps back at once, and epsilon down within a sixth of the budget, so
    # that most of a short run's experience comes from the agent's own policy.
    "dqn/auto-n10-fast-eps": {
        "algo": "dqn",
        "env": AUTO,
        "replay": {"n_step": 10},
        "exploration": {"decay_steps": 10_000, "epsilon_end": 0.01},
    },
    # ...and one update every env step instead of every fourth.
    "dqn/auto-n10-fast-eps-rr1": {
        "algo": "dqn",
        "env": AUTO,
        "replay": {"n_step": 10},
        "exploration": {"decay_steps": 10_000, "epsilon_end": 0.01},
        "learner": {"replay_ratio": 1.0, "target": {"period": 1000}},
    },
    "ppo/auto-lr1e-3-clip": {
        "algo": "ppo",
        "env": AUTO,
        "ppo": {"learning_rate": 1e-3, "rollout_steps": 64, "epochs": 8},
        "reward_shaping": [{"type": "clip"}],
    },
    # Scale-free learning signals: rewards divided by the running scale of the discounted
    # return (the YAML's weights no longer set the scale), for PPO with PopArt values too.
    "dqn/auto-normalize": {
        "algo": "dqn",
        "env": AUTO,
        "reward_shaping": [{"type": "normalize"}],
    },
    "ppo/auto-lr1e-3-normalize": {
        "algo": "ppo",
        "env": AUTO,
        "ppo": {"learning_rate": 1e-3, "rollout_steps": 64, "epochs": 8},
        "reward_shaping": [{"type": "normalize"}],
    },
    "ppo/auto-lr1e-3-popart": {
        "algo": "ppo",
        "env": AUTO,
        "ppo": {
            "learning_rate": 1e-3,
            "rollout_steps": 64,
            "epochs": 8,
            "value_normalization": True,
        },
    },
    "ppo/auto-lr1e-3-normalize-popart": {
        "algo": "ppo",
        "env": AUTO,
        "ppo": {
            "learning_rate": 1e-3,
            "rollout_steps": 64,
            "epochs": 8,
            "value_normalization": True,
        },
        "reward_shaping": [{"type": "normalize"}],
    },
    # Distill's teacher with its temperature in reward units (the default) or as a share of
    # each state's spread of safe returns: at temperature 1 in reward units a move that
    # reaches a pickup worth 1 (a key, a pearl) gets only e times the mass of one that
    # does not, and the teacher acts by drawing from that target.
    "distill/defaults": {"algo": "distill"},
    "distill/spread": {
        "algo": "distill",
        "distill": {"temperature_scale": "spread", "temperature": 0.25},
    },
    # In 30 minutes distill makes about 6,000 labels, too few to fall over 20,000 steps: the
    # teacher still acted in 41-71% of the steps at the end (docs/defaults.md). Beta over
    # the run's budget ends with the student playing; a beam of 2 instead of 8 makes a label
    # about 3x cheaper (6 actions x (1 + 16 x 2) emulator steps instead of 6 x (1 + 16 x 8)).
    "distill/budget-beta": {"algo": "distill", "distill": {"beta_decay_steps": None}},
    "distill/narrow": {"algo": "distill", "distill": {"width": 2}},
    "distill/narrow-budget-beta": {
        "algo": "distill",
        "distill": {"width": 2, "beta_decay_steps": None},
    },
    # Exploration for sparse pickups: a count-based bonus (#Exploration, Tang et al. 2017;
    # 0.01 is their coefficient for rewards of about 1, as a pearl or a key is here) on a
    # SimHash of the observation, or on Go-Explore's cells: the variables the actions move
    # (the player's position), in coarse bins. A SimHash of a whole screen barely sees the
    # player move (docs/defaults.md). With the cells, Go-Explore's return-then-explore too:
    # half the training episodes restart from saved states in the cells seen least.
    "dqn/auto-novelty": {"algo": "dqn", "env": AUTO, "reward_shaping": [{"type": "novelty"}]},
    "dqn/auto-novelty-cells": {
        "algo": "dqn",
        "env": AUTO,
        "reward_shaping": [{"type": "novelty", "cell": "variables"}],
    },
    "dqn/auto-explore": {"algo": "dqn", "env": AUTO, **GO_EXPLORE},
    "ppo/auto-lr1e-3-explore": {
        "algo": "ppo",
        "env": AUTO,
        "ppo": {"learning_rate": 1e-3, "rollout_steps": 64, "epochs": 8},
        **GO_EXPLORE,
    },
    # No rollback on a collapse of the evaluation score: learning to score can pass through
    # worse returns than surviving does (deep_dive: staying at the surface returns 0, and
    # diving for pearls dies at first), and a rollback restores the surviving checkpoint.
    "dqn/auto-no-collapse-rollback": {
        "algo": "dqn",
        "env": AUTO,
        "rollback": {"watch_collapse": False},
    },
    # The parts of BBF (Schwarzer et al. 2023) that a CPU can pay for: n-step returns
    # annealed from 10 to 3, four times the updates per env step, and the network shrunk
    # halfway to a fresh initialisation every 5,000 updates, so it keeps the plasticity to
    # learn from a replay buffer that changes as the agent does.
    "dqn/auto-bbf": {
        "algo": "dqn",
        "env": AUTO,
        "replay": {"n_step": 3, "n_step_anneal": {"start": 10, "steps": 20_000}},
        "exploration": {"decay_steps": 10_000, "epsilon_end": 0.01},
        "learner": {
            "replay_ratio": 1.0,
            "target": {"period": 1000},
            "shrink_perturb": {"every_updates": 5_000, "shrink": 0.5},
        },
    },
    # Learning from the search demonstrator, which plays any game from its YAML alone: 4
    # games of `oakemu-rl demo` (on both cores) before training, their time taken from the
    # run's. DQN keeps their transitions in replay with DQfD's large-margin loss (Hester et
    # al. 2018), PPO adds a behaviour-cloning loss that decays; no backplay, so every
    # training episode starts where an evaluation does. Sparse pickups are then in the
    # learner's batches from the first update, not only once exploration stumbles on them.
    "dqn/auto-search-demos": {
        "algo": "dqn",
        "env": AUTO,
        SEARCH_DEMOS: {"episodes": 4},
        "demos": {"backplay": False, "restart_states": False},
    },
    "ppo/auto-lr1e-3-search-demos": {
        "algo": "ppo",
        "env": AUTO,
        "ppo": {"learning_rate": 1e-3, "rollout_steps": 64, "epochs": 8},
        SEARCH_DEMOS: {"episodes": 4},
        "demos": {"backplay": False, "restart_states": False},
    },
    # A lost life ends bootstrapping (DeepMind's episodic life); the episode goes on.
    "dqn/auto-episodic-life": {"algo": "dqn", "env": AUTO, "episodic_life": True},
    "ppo/auto-lr1e-3-episodic-life": {
        "algo": "ppo",
        "env": AUTO,
        "ppo": {"learning_rate": 1e-3, "rollout_steps": 64, "epochs": 8},
        "episodic_life": True,
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60_000)
    parser.add_argument("--minutes", type=float, help="a wall-clock budget per run instead")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--episodes", type=int, default=30, help="greedy episodes per agent")
    parser.add_argument("--only", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES))
    parser.add_argument(
        "--games",
        nargs="+",
        choices=TRAINING_SET,
        default=list(TRAINING_SET),
        help="a part of the training set (catch's rewards are already in [-1, 1], so a "
        "clipping candidate trains there exactly as without)",
    )
    parser.add_argument("--out", type=Path, default=Path("benchmark-runs/defaults"))
    args = parser.parse_args()
    distill = [name for name in args.only if name.startswith("distill/")]
    if distill and args.minutes is None:
        parser.error(f"--only {' '.join(distill)}: give a wall-clock budget (--minutes); a "
                     "distill step is a search")  # fmt: skip

    results: dict[tuple[str, str], list[Evaluation]] = {}
    randoms: dict[str, list[Evaluation]] = {}
    for seed in args.seeds:
        for game in args.games:
            random_done = False
            for name in args.only:
                run_dir, _ = train(
                    args.out, CANDIDATES[name], game, seed, args.steps, minutes=args.minutes
                )
                results.setdefault((name, game), []).append(
                    evaluate(run_dir, args.episodes, seed=1000 + seed)
                )
                if not random_done:  # random play needs a checkpoint only to load the game
                    randoms.setdefault(game, []).append(
                        evaluate(run_dir, args.episodes, seed=1000 + seed, random=True)
                    )
                    random_done = True
    report(args, results, randoms)


def report(
    args: argparse.Namespace,
    results: dict[tuple[str, str], list[Evaluation]],
    randoms: dict[str, list[Evaluation]],
) -> None:
    budget = f"{args.minutes:g} minutes" if args.minutes else f"{args.steps:,} env steps"
    print(f"\nDefaults sweep: {budget}, seeds {args.seeds}, "
          f"{args.episodes} greedy episodes of each best checkpoint")  # fmt: skip
    header = ["candidate", *(f"{g} return [95% CI]" for g in args.games), "normalised"]
    rows = [["random", *(randoms[g][0].interval() for g in args.games), "0.00"]]
    chosen: dict[str, tuple[float, str]] = {}
    for name in args.only:
        algo = name.split("/")[0]
        normalised = []
        for game in args.games:
            floor = float(np.mean([r.mean_return for r in randoms[game]]))
            best = max(
                float(np.mean([r.mean_return for r in results[(other, game)]]))
                for other in args.only
                if other.startswith(algo + "/")
            )
            mine = float(np.mean([r.mean_return for r in results[(name, game)]]))
            normalised.append((mine - floor) / max(best - floor, 1e-9))
        score = float(np.mean(normalised))
        if score > chosen.get(algo, (-np.inf, ""))[0]:
            chosen[algo] = (score, name)
        cells = [" / ".join(r.interval() for r in results[(name, game)]) for game in args.games]
        rows.append([name, *cells, f"{score:.2f}"])
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    for algo, (score, name) in chosen.items():
        print(f"chosen for {algo}: {name} (mean normalised return {score:.2f})")


if __name__ == "__main__":
    main()
