"""Distillation learns a game: the shipped catch preset, from the search teacher alone.
(Kept apart from test_distill.py so that the two spread over the test workers.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from distill_testing import QUIET, no_print
from oakemu_rl.distill import DistillExperimentConfiguration
from oakemu_rl.experiments.distill_experiment import DistillExperiment

#: The learning test's budget and the mean greedy score (of 30: a won game) it must reach.
#: With the preset's safety teacher, measured at 900 steps, 4 final games: 30.0 on seeds 0, 1
#: and 2 on a quiet machine, 29-41 s a run (2026-12-06). With the beam teacher it had before,
#: the student's score spread widely under load (seed 0: 6.25 to 15.25 in CI runs, 30.0
#: quiet), for reasons not found; so the threshold stays at 3x random play's 1.6 catches a
#: game (a mean return of -3.4 over 5 lives): a student that learned something real.
LEARN_STEPS = 900
LEARN_THRESHOLD = 5.0


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 30-40 s on a quiet machine; far longer on a busy one
def test_distill_learns_catch_from_the_search_teacher(tmp_path: Path) -> None:
    """The shipped preset (safety teacher, horizon 16; RAM observation; beta from 1 to 0
    over 300 steps) on 2 worker processes, for LEARN_STEPS env steps: the greedy student
    then catches several times as many blocks as random play (30 catches win a game).
    Measured: see LEARN_STEPS."""
    config = DistillExperimentConfiguration.for_game(
        "catch",
        {
            "seed": 0,
            "total_steps": LEARN_STEPS,
            "torch_threads": 1,
            "env": {"num_workers": 2},
            "tester": {
                "every_steps": 10**9,
                "final_episodes": 4,
                "random_baseline": False,
            },
            "checkpoint": {"every_steps": 10**9},
            "logging": QUIET,
        },
    )
    summary = DistillExperiment(config, tmp_path / "run", print_fn=no_print).run()
    final = summary["final_eval"]
    assert summary["labels"] >= LEARN_STEPS
    assert final["mean_score"] >= LEARN_THRESHOLD, final
