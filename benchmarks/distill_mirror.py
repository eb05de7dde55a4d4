"""Does a left-right mirror make a distill run's labels go further? Fit students offline.

    python benchmarks/distill_mirror.py RUN_DIR [--swap O P] [--updates 2000] [--seeds 0 1]

Reads the aggregated dataset of a distill run's newest checkpoint and trains fresh students
of the run's architecture, loss, optimiser and minibatch size (critical states weighted as
the run weights them) on its training part, three ways:

- `plain`: the labels as they are;
- `mirrored`: every observation flipped left to right and its target's actions swapped
  (the actions whose keys differ only by `--swap`'s keys, O and P by default): if the
  game is symmetric, these are labels of states just as real;
- `both`: each minibatch state mirrored with chance 1/2 (twice the distinct states).

Each is scored on the held-out states as they are: the share of the critical ones (some
action loses a life, another does not) on which the student's most likely action is safe.
`mirrored` checks the symmetry itself: a student that never saw a real state scores about
as well as `plain` only where the mirrored labels are right. `both` shows what the mirror is
worth. The flip is over the observation's last axis (the screen's columns); it is meant for
screen-wide observations (a crop off the screen's centre is not mirrored by it).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from distill_labels import Augment, fit_student, load_run_labels
from oakemu_rl.games.loader import GameDefinition


def mirror_permutation(game: GameDefinition, left: str, right: str) -> list[int]:
    """For each action, the action whose keys are its keys with `left` and `right` swapped."""
    swap = {left: right, right: left}
    keys = [frozenset(action) for action in game.spec.actions]
    permutation = []
    for action in keys:
        mirrored = frozenset(swap.get(key, key) for key in action)
        if mirrored not in keys:
            raise SystemExit(
                f"{game.key}: action {sorted(action)} has no mirror {sorted(mirrored)}"
            )
        permutation.append(keys.index(mirrored))
    return permutation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--swap", nargs=2, default=["O", "P"], metavar=("LEFT", "RIGHT"))
    parser.add_argument("--updates", type=int, default=2_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    labels = load_run_labels(args.run_dir)
    config = labels.config
    permutation = mirror_permutation(labels.game, *args.swap)
    print(
        f"{labels.describe(args.run_dir)}; action mirror {permutation}; "
        f"{args.updates:,} updates of {config.distill.batch_size}",
        flush=True,
    )

    def mirror(share: float) -> Augment:
        """Each minibatch state flipped left to right with chance `share`, its target's
        actions swapped by `permutation`."""

        def augment(
            rng: np.random.Generator, inputs: torch.Tensor, wanted: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            flip = torch.from_numpy(rng.random(len(inputs)) < share)
            if flip.any():
                inputs[flip] = inputs[flip].flip(-1)
                wanted = torch.where(flip[:, None], wanted[:, permutation], wanted)
            return inputs, wanted

        return augment

    mirror_share = {"plain": 0.0, "mirrored": 1.0, "both": 0.5}
    results: dict[str, list[float]] = {name: [] for name in mirror_share}
    for seed in args.seeds:
        for name, share in mirror_share.items():
            started = time.monotonic()
            model = fit_student(labels, config, args.updates, seed, mirror(share)).model
            safe = labels.held_out_safe_rate(model, args.run_dir)
            results[name].append(safe)
            print(
                f"seed {seed} {name:>8}: a safe move on {safe:.2%} of held-out critical "
                f"states ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
    unsafe = {name: 1.0 - float(np.mean(rates)) for name, rates in results.items()}
    for name, rate in unsafe.items():
        print(f"{name:>8}: unsafe on {rate:.2%} of held-out critical states (mean of seeds)")
    if unsafe["both"] > 0:
        print(f"unsafe choices, plain / both: {unsafe['plain'] / unsafe['both']:.2f}x")


if __name__ == "__main__":
    main()
