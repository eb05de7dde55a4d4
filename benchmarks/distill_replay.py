"""Does a distill student lose plasticity? Replay a run's labels offline, in order.

    python benchmarks/distill_replay.py RUN_DIR [--labels 60000] [--every 2000] [--shrink 0]

Reads the aggregated dataset of a distill run's newest checkpoint (its labels are stored in
the order they came) and trains two students of the run's own architecture, loss and
optimiser as the run did: one update per 1 / `updates_per_step` labels, each minibatch drawn
from the labels so far (critical states weighted as the run weights them). One is trained
continually, as `distill` does by default; the other is shrunk towards a fresh
initialisation every `--every` updates (`distill.shrink_perturb`; `--shrink 0` resets it).
Both are scored on the held-out states among the first `--labels` labels: the share of the
critical ones (some action loses a life, another does not) on which the student's most
likely action is safe. Prints both and the ratio of their unsafe choices.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from distill_labels import load_run_labels, update
from oakemu_rl.experiments.distill_experiment import DistillExperiment
from oakemu_rl.runtime.shrink_perturb import ShrinkPerturbSettings, shrink_and_perturb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--labels", type=int, default=60_000)
    parser.add_argument("--every", type=int, default=2_000)
    parser.add_argument("--shrink", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    labels = load_run_labels(args.run_dir)
    config, shape, observations = labels.config, labels.shape, labels.observations
    count = min(args.labels, len(labels.targets))
    settings = config.distill
    targets_np = labels.targets[:count]
    targets = torch.from_numpy(targets_np)
    held_out, critical = labels.held_out[:count], labels.critical[:count]
    num_actions = targets_np.shape[1]

    test = np.flatnonzero(held_out)
    stride = max(1, round(1 / settings.updates_per_step))
    print(
        f"{args.run_dir}: the first {count:,} of {len(labels.targets):,} labels, "
        f"{len(test):,} held out; an update every {stride} labels",
        flush=True,
    )
    schedules = {
        "continual": ShrinkPerturbSettings(),
        f"shrink {args.shrink:g} every {args.every:,}": ShrinkPerturbSettings(
            every_updates=args.every, shrink=args.shrink
        ),
    }
    unsafe: list[float] = []
    for name, schedule in schedules.items():
        torch.manual_seed(args.seed)
        model = DistillExperiment.build_model(config, shape, num_actions)
        optimizer = torch.optim.Adam(
            model.parameters(), settings.learning_rate, eps=settings.adam_eps
        )
        rng = np.random.default_rng(args.seed)
        started, updates = time.monotonic(), 0
        for labelled in range(settings.learning_starts, count, stride):
            rows = np.flatnonzero(~held_out[:labelled])
            weights = np.where(critical[rows], settings.critical_weight, 1.0)
            batch = rng.choice(rows, settings.batch_size, p=weights / weights.sum())
            update(model, optimizer, observations(batch), targets[batch], settings.max_grad_norm)
            updates += 1
            if schedule.due(updates):
                seed = schedule.seed(args.seed, updates)
                shrink_and_perturb(model, schedule.shrink, seed)
        safe = labels.safe_rate(model, test)
        if safe is None:
            raise SystemExit(f"{args.run_dir}: no held-out critical state among the labels")
        unsafe.append(1.0 - safe)
        print(
            f"{name:>24}: {updates:,} updates; a safe move on {safe:.1%} of held-out critical "
            f"states ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
    if unsafe[1] > 0:
        print(f"unsafe choices, continual / with shrink: {unsafe[0] / unsafe[1]:.2f}x")


if __name__ == "__main__":
    main()
