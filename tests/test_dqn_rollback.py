"""Automatic rollback in a DQN run: a NaN loss restores the last good checkpoint."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.experiments import DQNExperiment
from oakemu_rl.runtime.checkpoints import CheckpointManager


def config(**overrides: Any) -> DQNExperimentConfiguration:
    data: dict[str, Any] = {
        "game": "gym:CartPole-v1",
        "total_steps": 1500,
        "env": {"num_envs": 2, "backend": "inline"},
        "model": {"mlp_hidden": [32], "head_hidden": 0},
        "learner": {"learning_starts": 100, "replay_ratio": 0.25, "batch_size": 16},
        "replay": {"capacity": 5000},
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": 300, "keep_last": 10},
        "logging": {"console": False, "tensorboard": False},
        "torch_threads": 1,
    }
    data.update(overrides)
    return DQNExperimentConfiguration.from_dict(data)


def test_nan_loss_rolls_back_to_the_checkpoint_weights_and_is_counted(tmp_path: Path) -> None:
    experiment = DQNExperiment(config(), tmp_path / "run", console=False, print_fn=lambda _: None)
    experiment.build()
    learner = experiment.learner
    original = learner.update
    calls = [0]
    restored_weights: list[dict[str, torch.Tensor]] = []

    def poisoned() -> dict[str, float]:
        calls[0] += 1
        metrics = original()
        if calls[0] == 150:  # past the first checkpoint (step 300 = 50 updates)
            with torch.no_grad():
                for p in learner.model.parameters():
                    p.fill_(math.nan)
            metrics["loss"] = math.nan
        return metrics

    learner.update = poisoned  # type: ignore[method-assign]
    controller = experiment.rollback
    trigger = controller.trigger

    def record(reason: str, step: int, kind: str = "manual") -> bool:
        done = trigger(reason, step, kind)
        restored_weights.append({k: v.clone() for k, v in learner.model.state_dict().items()})
        return done

    controller.trigger = record  # type: ignore[method-assign]
    summary = experiment.run()

    assert summary["total_rollbacks"] == 1
    assert summary["stop_reason"] == "step budget reached" and summary["steps"] >= 1500
    rollback = summary["rollbacks"][0]
    checkpoint = next(
        c
        for c in CheckpointManager(tmp_path / "run" / "checkpoints").list()
        if c.step == rollback["checkpoint_step"]
    )
    saved = checkpoint.load_torch("model.pt")["learner"]
    for name, tensor in restored_weights[0].items():
        assert torch.equal(tensor, saved[name]), name
    assert all(torch.isfinite(p).all() for p in learner.model.parameters())
    latest = CheckpointManager(tmp_path / "run" / "checkpoints").latest()
    assert latest is not None and latest.manifest["total_rollbacks"] == 1
    state = json.loads((latest.path / "run_state.json").read_text())
    assert state["total_rollbacks"] == 1
