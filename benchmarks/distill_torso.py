"""Which torso imitates the teacher best? Fit fresh students offline on a distill run's labels.

    python benchmarks/distill_torso.py RUN_DIR [--torsos small_cnn cell_cnn] [--updates 2000]
        [--seeds 0 1]

Reads the aggregated dataset of a distill run's newest checkpoint and, for each torso of
`oakemu_rl.runtime.torsos`, trains fresh students with the run's configuration otherwise
(loss, optimiser, minibatch size, critical states weighted as the run weights them) on its
training part. Each is scored on the held-out states: the share of the critical ones (some
action loses a life, another does not) on which the student's most likely action is unsafe.
Prints each torso's unsafe share (the mean over seeds), its milliseconds an update and a
greedy forward pass, and the ratio of each torso's unsafe choices to the first's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from distill_labels import fit_student, load_run_labels
from oakemu_rl.runtime.torsos import CNN_TORSOS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument(
        "--torsos", nargs="+", choices=sorted(CNN_TORSOS), default=["small_cnn", "cell_cnn"]
    )
    parser.add_argument("--updates", type=int, default=2_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    labels = load_run_labels(args.run_dir)
    config, shape, observations = labels.config, labels.shape, labels.observations
    settings = config.distill
    test = labels.split()[1]
    print(
        f"{labels.describe(args.run_dir)}; observations {shape}; {args.updates:,} updates "
        f"of {settings.batch_size}",
        flush=True,
    )
    unsafe: dict[str, list[float]] = {torso: [] for torso in args.torsos}
    update_ms: dict[str, list[float]] = {torso: [] for torso in args.torsos}
    forward_ms: dict[str, float] = {}
    for seed in args.seeds:
        for torso in args.torsos:
            torso_config = config.model_copy(
                update={"model": config.model.model_copy(update={"torso": torso})}
            )
            model, training_s = fit_student(labels, torso_config, args.updates, seed)
            update_ms[torso].append(1000 * training_s / args.updates)
            one = observations(test[:1])
            with torch.no_grad():
                started = time.perf_counter()
                for _ in range(100):
                    model.greedy_actions(one)
                forward_ms[torso] = 10 * (time.perf_counter() - started)
            safe = labels.held_out_safe_rate(model, args.run_dir)
            unsafe[torso].append(1.0 - safe)
            print(
                f"seed {seed} {torso:>10}: unsafe on {1.0 - safe:.2%} of held-out critical "
                f"states ({update_ms[torso][-1]:.1f} ms an update)",
                flush=True,
            )
    first = args.torsos[0]
    baseline = float(np.mean(unsafe[first]))
    for torso in args.torsos:
        rate = float(np.mean(unsafe[torso]))
        ratio = f"{baseline / rate:.2f}x fewer than {first}" if rate > 0 else "none unsafe"
        print(
            f"{torso:>10}: unsafe on {rate:.2%} (mean of {len(args.seeds)} seeds; {ratio}); "
            f"{np.mean(update_ms[torso]):.1f} ms an update of {settings.batch_size}, "
            f"{forward_ms[torso]:.2f} ms a greedy action"
        )


if __name__ == "__main__":
    main()
