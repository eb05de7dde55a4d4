"""`evaluate` leaves the emulator workers their cores: torch plays with the threads the
workers leave free (torch's idle threads spin, and the workers run at a lower priority,
so with every core torch's, two evaluations on a 2-core machine barely moved), and the
caller gets its own thread count back."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import oakemu_rl.experiments.evaluation as evaluation
from oakemu_rl.experiments import EXPERIMENTS, evaluate_checkpoint, find_checkpoint
from test_experiment import quiet


def test_evaluation_plays_with_the_threads_the_workers_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data: dict[str, Any] = {
        "algo": "dqn",
        "game": "catch",
        "total_steps": 128,
        "env": {"num_envs": 2, "backend": "inline"},
        "learner": {"learning_starts": 64, "batch_size": 16},
        "tester": {"enabled": False, "max_episode_steps": 20},
        "logging": {"console": False, "tensorboard": False},
    }
    quiet(EXPERIMENTS["dqn"].config_type.from_dict(data), tmp_path / "run").run()

    seen: list[int] = []
    load = evaluation.load_checkpoint_model

    def spied_load(*args: Any, **kwargs: Any) -> nn.Module:
        model = load(*args, **kwargs)
        model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
        return model

    monkeypatch.setattr(evaluation, "load_checkpoint_model", spied_load)
    cores = len(os.sched_getaffinity(0))
    caller = torch.get_num_threads()
    checkpoint = find_checkpoint(tmp_path / "run")
    evaluate_checkpoint(checkpoint, 2, num_envs=2, backend="process")
    assert seen and set(seen) == {max(1, cores - 2)}  # two envs: two worker processes
    evaluate_checkpoint(checkpoint, 2, num_envs=2, backend="inline")
    assert seen[-1] == cores  # inline: no workers, every core
    assert torch.get_num_threads() == caller
