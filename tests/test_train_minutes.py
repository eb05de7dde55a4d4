"""`oakemu-rl train --minutes N`: a wall-clock budget, with a final checkpoint, over which
the run's schedules anneal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from oakemu_rl.cli.main import main
from oakemu_rl.cli.train_cmd import CLOCK_BUDGET_STEPS
from oakemu_rl.experiments import find_checkpoint
from oakemu_rl.runtime.context import RuntimeContext
from oakemu_rl.runtime.metrics import ConsoleSink
from ppo_testing import small_config


def test_train_minutes_stops_on_the_clock_with_a_final_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = small_config(
        total_steps=1000, tester={"enabled": False}, checkpoint={"every_steps": 10**9}
    )
    path = tmp_path / "ppo.yaml"
    path.write_text(config.to_yaml())
    run_dir = tmp_path / "run"
    command = ["train", "--config", str(path), "--run-dir", str(run_dir), "--quiet"]
    assert main([*command, "--minutes", "0.1"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "time limit of 6 s"
    assert summary["total_steps"] == CLOCK_BUDGET_STEPS  # no --steps: the clock is the budget
    assert 6 <= summary["session_s"] < 60
    assert summary["steps"] > 0
    # The final checkpoint holds the last step, though no schedule point fell in the run.
    assert find_checkpoint(run_dir).step == summary["steps"]

    # With --steps too, whichever budget runs out first ends the run.
    both = tmp_path / "both"
    args = ["--run-dir", str(both), "--quiet", "--minutes", "5", "--steps", "64"]
    assert main(["train", "--config", str(path), *args]) == 0
    summary = json.loads((both / "summary.json").read_text())
    assert summary["steps"] == 64 and summary["stop_reason"] == "step budget reached"

    capsys.readouterr()
    assert main(["train", "--resume", str(run_dir), "--minutes", "1"]) == 2
    assert "--minutes" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse refuses it before anything starts
        main([*command[:-3], "--run-dir", str(tmp_path / "x"), "--minutes", "0"])
    assert "must be above 0" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_budget_used_follows_the_clock_when_it_runs_out_first(tmp_path: Path) -> None:
    config = small_config(total_steps=1000, max_time_s=10.0)
    now = [0.0]
    context = RuntimeContext(
        config=config, device=torch.device("cpu"), run_dir=tmp_path, session_clock=lambda: now[0]
    )
    assert context.budget_used(100) == pytest.approx(0.1)  # steps lead
    now[0] = 5.0
    assert context.budget_used(100) == pytest.approx(0.5)  # the clock leads
    now[0] = 20.0
    assert context.budget_used(100) == 1.0
    steps_only = RuntimeContext(config=small_config(total_steps=1000), device=torch.device("cpu"),
                                run_dir=tmp_path, session_clock=lambda: 1e9)  # fmt: skip
    assert steps_only.budget_used(250) == pytest.approx(0.25)


def test_the_console_shows_minutes_of_a_clock_budget() -> None:
    sink = ConsoleSink(CLOCK_BUDGET_STEPS, interval=0.0, live=False, time_limit_s=1800)
    assert "1,234 steps, 0.0/30 min" in sink._done(1234)
    assert sink._fraction(1234) < 0.01
    plain = ConsoleSink(60_000, interval=0.0, live=False)
    assert plain._done(1234).strip() == "1,234/60,000 steps"
