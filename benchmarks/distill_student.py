"""Which student imitates the teacher best? Fit fresh students offline on a distill run's labels.

    python benchmarks/distill_student.py RUN_DIR [--torsos small_cnn cell_cnn]
        [--losses cross_entropy safe_set] [--updates 2000] [--seeds 0 1] [--members 3]
        [--curve 500] [--ema 0.99 0.999] [--sampling all decisions] [--later 0.1]

Reads the aggregated dataset of a distill run's newest checkpoint and, for each torso of
`oakemu_rl.runtime.torsos` and each `distill.loss`, trains fresh students with the run's
configuration otherwise (optimiser, minibatch size, critical states weighted as the run
weights them) on its training part. Each is scored on the held-out states: the share of the
critical ones (some action loses a life, another does not) on which the student's most
likely action is unsafe. Prints each student's unsafe share (the mean over seeds), its
milliseconds an update and a greedy forward pass, and the ratio of each student's unsafe
choices to the first's (the first torso with the first loss).

`--members K` makes each student an ensemble of K networks trained apart (their own
initial weights and minibatches) whose action probabilities are averaged: it prints the
members' unsafe share beside the ensemble's, the question being whether the student's
errors are the variance of one fit. `--curve N` prints each fit's unsafe share every N
updates, the question being whether more updates would help. `--ema D` scores instead the
moving average of each network's weights that `distill.ema_decay: D` acts with (beside the
trained weights' own figure in `--curve`): an ensemble over time that costs no more
updates and no more at play time. `--sampling all decisions` fits each student twice: on
minibatches of every training state, and of only those whose target rules some action out
(the others teach the safe-set loss nothing). `--later F` keeps the last share F of the
labels out of training altogether and scores every student on them too ("later"): the
run's held-out labels are drawn one at a time, each with near copies a step away among the
training labels, where the later ones come from episodes the student never trained on.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from distill_labels import Student, fit_student, load_run_labels
from oakemu_rl.distill.loss import LOSSES
from oakemu_rl.ppo.model import PPOModel
from oakemu_rl.runtime.torsos import CNN_TORSOS


class Ensemble(nn.Module):
    """Networks whose action probabilities are averaged; the most likely action of the
    average is the ensemble's."""

    def __init__(self, members: list[PPOModel]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)

    def greedy_actions(self, observations: torch.Tensor) -> torch.Tensor:
        probabilities = [torch.softmax(m(observations), dim=-1) for m in self.members]
        return torch.stack(probabilities).mean(dim=0).argmax(dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--torsos", nargs="+", choices=sorted(CNN_TORSOS), default=["small_cnn"])
    parser.add_argument(
        "--losses", nargs="+", choices=list(LOSSES), default=["cross_entropy", "safe_set"]
    )
    parser.add_argument(
        "--sampling",
        nargs="+",
        choices=["all", "decisions"],
        default=["all"],
        help="minibatches drawn from every training state, or only from those whose target "
        "rules some action out (the safe-set loss learns nothing from the others)",
    )
    parser.add_argument("--updates", type=int, default=2_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--members", type=int, default=1, help="networks in each student")
    parser.add_argument("--curve", type=int, default=0, help="print unsafe every N updates")
    parser.add_argument(
        "--later",
        type=float,
        default=0.0,
        help="keep this share of the labels, the last to come, apart and score on it too",
    )
    parser.add_argument(
        "--ema",
        type=float,
        nargs="+",
        default=[],
        help="score also the moving average of each network's weights that "
        "distill.ema_decay acts with, for each of these decays",
    )
    args = parser.parse_args()
    if not 0.0 <= args.later < 1.0:
        parser.error(f"--later {args.later}: expected a share in [0, 1)")
    labels = load_run_labels(args.run_dir, args.later)
    config, shape, observations = labels.config, labels.shape, labels.observations
    settings = config.distill
    test = labels.split()[1]
    print(
        f"{labels.describe(args.run_dir)}; observations {shape}; {args.updates:,} updates "
        f"of {settings.batch_size}",
        flush=True,
    )
    students = [
        f"{t}/{loss}" + ("/decisions" if sampling == "decisions" else "")
        for t, loss, sampling in itertools.product(args.torsos, args.losses, args.sampling)
    ]
    rows = [f"{s}{tag}" for s in students for tag in ["", *(f" ema {d}" for d in args.ema)]]
    unsafe: dict[str, list[float]] = {row: [] for row in rows}
    later_unsafe: dict[str, list[float]] = {row: [] for row in rows}
    update_ms: dict[str, list[float]] = {row: [] for row in rows}
    forward_ms: dict[str, float] = {}

    def unsafe_text(model: Student) -> str:
        text = f"{1 - labels.held_out_safe_rate(model, args.run_dir):.2%}"
        if args.later:
            text += f" (later {1 - labels.later_safe_rate(model):.2%})"
        return text

    for seed in args.seeds:
        for student in students:
            torso, loss, *sampling = student.split("/")
            torso_config = config.model_copy(
                update={"model": config.model.model_copy(update={"torso": torso})}
            )
            members: dict[str, list[PPOModel]] = {}
            training_s = 0.0
            for member in range(args.members):

                def report(
                    done: int,
                    model: PPOModel,
                    averages: dict[float, PPOModel],
                    tag: str = f"seed {seed} {student} {member}",
                ) -> None:
                    line = f"  {tag}: {done:,} updates, unsafe {unsafe_text(model)}"
                    for decay, average in averages.items():
                        line += f", ema {decay} {unsafe_text(average)}"
                    print(line, flush=True)

                fitted = fit_student(
                    labels,
                    torso_config,
                    args.updates,
                    seed * 1000 + member,
                    loss=LOSSES[loss],
                    every=(args.curve, report) if args.curve else None,
                    ema=args.ema,
                    decisions_only=bool(sampling),
                )
                members.setdefault(student, []).append(fitted.model)
                for decay, average in fitted.averages.items():
                    members.setdefault(f"{student} ema {decay}", []).append(average)
                training_s += fitted.seconds
            for row, fits in members.items():
                if args.members > 1:
                    alone = [1 - labels.held_out_safe_rate(m, args.run_dir) for m in fits]
                    print(
                        f"seed {seed} {row:>24}: members unsafe on "
                        + ", ".join(f"{a:.2%}" for a in alone),
                        flush=True,
                    )
                model = Ensemble(fits) if args.members > 1 else fits[0]
                update_ms[row].append(1000 * training_s / args.updates)
                one = observations(test[:1])
                with torch.no_grad():
                    started = time.perf_counter()
                    for _ in range(100):
                        model.greedy_actions(one)
                    forward_ms[row] = 10 * (time.perf_counter() - started)
                safe = labels.held_out_safe_rate(model, args.run_dir)
                unsafe[row].append(1.0 - safe)
                later = ""
                if args.later:
                    later_unsafe[row].append(1.0 - labels.later_safe_rate(model))
                    later = f", on {later_unsafe[row][-1]:.2%} of the later ones"
                print(
                    f"seed {seed} {row:>24}: unsafe on {1.0 - safe:.2%} of held-out critical "
                    f"states{later} ({update_ms[row][-1]:.1f} ms an update)",
                    flush=True,
                )
    first = rows[0]
    baseline = float(np.mean(unsafe[first]))
    for row in rows:
        rate = float(np.mean(unsafe[row]))
        ratio = f"{baseline / rate:.2f}x fewer than {first}" if rate > 0 else "none unsafe"
        later = f", on {np.mean(later_unsafe[row]):.2%} of the later" if args.later else ""
        print(
            f"{row:>24}: unsafe on {rate:.2%}{later} (mean of {len(args.seeds)} seeds; {ratio}); "
            f"{np.mean(update_ms[row]):.1f} ms an update of {settings.batch_size}, "
            f"{forward_ms[row]:.2f} ms a greedy action"
        )


if __name__ == "__main__":
    main()
