"""Do the shipped presets solve their games? What a CLI user gets with no settings at all.

    python benchmarks/presets.py [--seeds 0 1 2] [--only dqn/CartPole-v1 ...]

For each preset and seed it runs, as a user would,

    oakemu-rl train --algo A --game G --steps N --seed S --run-dir D --quiet
    oakemu-rl evaluate D --episodes 20 --json

(N: the preset's own budget; `evaluate` takes the run's best checkpoint by evaluation)
and prints the greedy mean return of each seed against the game's bar: 195 for
CartPole-v1 (Gymnasium's "solved"), -100 for Acrobot-v1, and for the bundled games the
random policy's return from the run's own baseline.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from oakemu_rl.presets import available_presets

OAKEMU_RL = [sys.executable, "-m", "oakemu_rl.cli.main"]
BARS = {"CartPole-v1": 195.0, "Acrobot-v1": -100.0}
GYM_IDS = {"CartPole-v1", "Acrobot-v1", "LunarLander-v3"}


def game_of(stem: str) -> str:
    return f"gym:{stem}" if stem in GYM_IDS else stem


def run_one(algo: str, game: str, steps: int, seed: int, root: Path) -> dict[str, Any]:
    run_dir = root / f"{algo}-{game.replace(':', '_')}-{seed}"
    train = [*OAKEMU_RL, "train", "--algo", algo, "--game", game, "--steps", str(steps)]
    started = time.monotonic()
    subprocess.run(
        [*train, "--seed", str(seed), "--run-dir", str(run_dir), "--quiet"],
        check=True,
        capture_output=True,
    )
    seconds = time.monotonic() - started
    result = subprocess.run(
        [*OAKEMU_RL, "evaluate", str(run_dir), "--episodes", "20", "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    evaluation = json.loads(result.stdout)
    summary = json.loads((run_dir / "summary.json").read_text())
    baseline = (summary.get("random_baseline") or {}).get("mean_return")
    return {
        "seed": seed,
        "mean_return": evaluation["mean_return"],
        "checkpoint_step": evaluation["step"],
        "random": baseline,
        "train_s": round(seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", help="presets to run, as algo/game")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oakemu-presets-") as tmp:
        for preset in available_presets():
            if args.only and preset.name not in args.only:
                continue
            steps = int(preset.settings().get("total_steps", 60_000))
            game = game_of(preset.game)
            rows = [run_one(preset.algo, game, steps, s, Path(tmp)) for s in args.seeds]
            bar = BARS.get(preset.game)
            if bar is None:  # a bundled game: beat the random policy clearly
                bars = [r["random"] for r in rows if r["random"] is not None]
                bar = max(bars) if bars else None
            solved = bar is not None and all(r["mean_return"] >= bar for r in rows)
            returns = " / ".join(f"{r['mean_return']:.1f}" for r in rows)
            print(
                f"{preset.name}: {steps:,} steps, greedy mean return (20 episodes) per seed "
                f"{returns}; bar {bar}; {'PASS' if solved else 'FAIL'}",
                flush=True,
            )
            print("  " + json.dumps(rows), flush=True)


if __name__ == "__main__":
    main()
