"""Automatic rollback: non-finite losses and weights, score collapse, give-up, persistence."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from oakemu_rl.ppo.learner import NonFiniteLossError
from oakemu_rl.runtime.checkpoints import Checkpoint, CheckpointFile, CheckpointManager
from oakemu_rl.runtime.metrics import MemorySink
from oakemu_rl.runtime.rollback import RollbackController, RollbackSettings
from ppo_testing import (
    Components,
    assert_same_weights,
    build_components,
    fill_buffer,
    small_config,
    weights,
)

# Learning-rate annealing runs over total_steps: keep it far away from the steps used here.
LONG = small_config(total_steps=1_000_000)


def _controller(c: Components, **settings: Any) -> tuple[RollbackController, list[str]]:
    """The controller a run builds (restore through the state adapter, then scale the
    learning rate); the learner reports to it."""
    messages: list[str] = []

    def restore(checkpoint: Checkpoint, lr_scale: float) -> int:
        step = c.adapter.restore_for_rollback(checkpoint)
        c.learner.set_lr_scale(lr_scale)
        return step

    controller = RollbackController(
        RollbackSettings(**settings),
        c.checkpoints,
        restore,
        metrics=c.metrics,
        log=messages.append,
        on_give_up=lambda text: messages.append(f"GIVE UP: {text}"),
    )
    c.learner.monitor = controller
    return controller, messages


def _save(
    c: Components, step: int, controller: RollbackController, score: float | None = None
) -> Checkpoint:
    c.actor._steps = step  # the actor step recorded in the checkpoint
    files = c.adapter.create_checkpoint_files(
        elapsed_time=1.0, total_rollbacks=controller.total_rollbacks, run_name="test"
    )
    return c.checkpoints.save(files, step=step, elapsed_time=1.0, run_name="test", score=score)


def _optimizer_state(c: Components) -> dict[str, Any]:
    state = c.optimizer.state_dict()
    return {
        k: {n: v.clone() if isinstance(v, torch.Tensor) else v for n, v in s.items()}
        for k, s in state["state"].items()
    }


def test_injected_nan_rolls_back_to_the_earlier_weights_exactly(tmp_path: Path) -> None:
    c = build_components(tmp_path, LONG)
    controller, messages = _controller(c)
    fill_buffer(c, seed=1)
    c.learner.train_on_rollout()
    checkpoint = _save(c, 100, controller)
    saved_weights, saved_optimizer = weights(c.learner_model), _optimizer_state(c)

    fill_buffer(c, seed=2)
    c.learner.train_on_rollout()
    moved = weights(c.learner_model)
    assert any(not torch.equal(moved[k], saved_weights[k]) for k in moved)

    version = c.container.version
    fill_buffer(c, seed=3)
    c.buffer.rewards[3, 1] = math.nan  # the injected NaN
    result = c.learner.train_on_rollout()

    assert result == {"rolled_back": 1.0}
    assert_same_weights(weights(c.learner_model), saved_weights)
    for key, state in _optimizer_state(c).items():
        for name, value in state.items():
            expected = saved_optimizer[key][name]
            assert (
                torch.equal(value, expected)
                if isinstance(value, torch.Tensor)
                else value == expected
            )
    assert c.container.version > version  # published: the actor picks the weights up
    assert controller.total_rollbacks == 1 and controller.rollbacks_without_recovery == 1
    assert controller.lr_scale == 0.5 and c.learner.lr_scale == 0.5
    assert c.learner.learning_rate(0) == pytest.approx(0.5 * c.config.ppo.learning_rate)
    assert c.metrics.get("train/total_rollbacks") == 1.0
    assert "non-finite loss" in messages[0] and checkpoint.path.name in messages[0]
    assert controller.history[0]["checkpoint_step"] == 100

    # The count is kept in later checkpoints.
    later = _save(c, 200, controller)
    assert json.loads((later.path / "run_state.json").read_text())["total_rollbacks"] == 1


def test_score_collapse_rolls_back_to_the_best_checkpoint(tmp_path: Path) -> None:
    c = build_components(tmp_path, LONG)
    controller, messages = _controller(c, collapse_fraction=0.5, collapse_window=1)
    controller.set_baseline(-2.0)  # the random policy's score: the floor
    fill_buffer(c, seed=1)
    c.learner.train_on_rollout()
    _save(c, 100, controller, score=10.0)
    best_weights = weights(c.learner_model)
    assert not controller.observe_evaluation(10.0, 100)
    fill_buffer(c, seed=2)
    c.learner.train_on_rollout()
    _save(c, 200, controller, score=6.0)
    # 6 >= -2 + 0.5 * (10 - -2) = 4: no collapse.
    assert controller.collapse_threshold() == pytest.approx(4.0)
    assert not controller.observe_evaluation(6.0, 200)
    fill_buffer(c, seed=3)
    c.learner.train_on_rollout()
    _save(c, 300, controller, score=1.0)
    assert controller.observe_evaluation(1.0, 300)  # 1 < 4: collapse

    assert_same_weights(weights(c.learner_model), best_weights)
    assert controller.total_rollbacks == 1
    assert "score collapse at step 300" in messages[0] and "step_0000000100" in messages[0]
    # A healthy evaluation afterwards is a recovery.
    assert not controller.observe_evaluation(9.0, 400)
    assert controller.rollbacks_without_recovery == 0


def test_a_lucky_evaluation_within_noise_of_random_play_is_no_level_to_collapse_from(
    tmp_path: Path,
) -> None:
    # key_hunt, 30 minutes of DQN: random play returns -3, and so does the agent, but one
    # evaluation of 10 games scored -2.9 (a key found once). Falling back to -3 is noise,
    # not a collapse: the evaluation's interval reached below random play.
    c = build_components(tmp_path, LONG)
    controller, messages = _controller(c, collapse_window=2)
    controller.set_baseline(-3.0)
    fill_buffer(c)
    c.learner.train_on_rollout()
    _save(c, 100, controller, score=-3.1)
    assert not controller.observe_evaluation(-2.9, 100, lower=-3.1)
    for step in (200, 300, 400, 500):
        assert not controller.observe_evaluation(-3.0, step, lower=-3.0)
    assert controller.collapse_threshold() is None and controller.total_rollbacks == 0
    # An evaluation whose whole interval lies above random play arms the watch.
    assert not controller.observe_evaluation(5.0, 600, lower=2.0)
    assert controller.collapse_threshold() == pytest.approx(1.0)  # -3 + 0.5 * (5 - -3)
    again, _ = _controller(c, collapse_window=2)
    again.load_state_dict(controller.state_dict())
    assert again.floor_beaten and again.collapse_threshold() == pytest.approx(1.0)
    assert not controller.observe_evaluation(-3.0, 700, lower=-3.0)  # mean 1.0: not below
    assert controller.observe_evaluation(-3.0, 800, lower=-3.0)
    assert controller.total_rollbacks == 1 and "score collapse at step 800" in messages[0]


def test_collapse_window_averages_evaluations(tmp_path: Path) -> None:
    c = build_components(tmp_path, LONG)
    controller, _ = _controller(c, collapse_window=3)
    fill_buffer(c)
    c.learner.train_on_rollout()
    _save(c, 100, controller, score=10.0)
    assert not controller.observe_evaluation(10.0, 100)
    assert not controller.observe_evaluation(1.0, 200)  # mean 5.5 over 2 < window
    assert not controller.observe_evaluation(6.0, 300)  # mean of 10, 1, 6 = 5.67 >= 5
    assert controller.observe_evaluation(2.0, 400)  # mean of 1, 6, 2 = 3 < 5
    assert controller.total_rollbacks == 1


def test_rollbacks_without_recovery_stop_the_run(tmp_path: Path) -> None:
    c = build_components(tmp_path, LONG)
    controller, messages = _controller(c, max_rollbacks_without_recovery=2)
    fill_buffer(c)
    c.learner.train_on_rollout()
    _save(c, 100, controller)
    for _ in range(2):
        assert controller.check_loss(float("nan"), 150)
    assert controller.total_rollbacks == 2 and not controller.gave_up
    assert controller.check_loss(float("inf"), 160)  # the third: give up, no rollback
    assert controller.gave_up and controller.total_rollbacks == 2
    assert messages[-1].startswith("GIVE UP: automatic rollback gave up")
    assert "2 rollback(s) without recovery" in messages[-1]
    assert not controller.check_loss(float("nan"), 170)  # never loops


def test_healthy_updates_recover_from_a_non_finite_rollback(tmp_path: Path) -> None:
    c = build_components(tmp_path, LONG)
    controller, _ = _controller(c, recovery_updates=3)
    fill_buffer(c)
    c.learner.train_on_rollout()
    _save(c, 100, controller)
    assert controller.check_loss(float("nan"), 100)
    assert controller.rollbacks_without_recovery == 1
    for _ in range(3):
        assert not controller.check_loss(0.5, 110)
    assert controller.rollbacks_without_recovery == 0


def test_no_checkpoint_stops_the_run_with_a_clear_message(tmp_path: Path) -> None:
    c = build_components(tmp_path, LONG)
    controller, messages = _controller(c)
    assert controller.check_weights([torch.tensor([1.0, math.nan])], 10)
    assert controller.gave_up
    assert "non-finite weights at step 10" in messages[-1]
    assert "no valid checkpoint" in messages[-1]


def test_without_rollback_a_nan_loss_is_an_error(tmp_path: Path) -> None:
    c = build_components(tmp_path, LONG)
    fill_buffer(c)
    c.buffer.rewards[0, 0] = math.nan
    with pytest.raises(NonFiniteLossError, match="non-finite PPO loss"):
        c.learner.train_on_rollout()
    # The minibatch with the NaN was never applied (earlier minibatches were).
    assert all(torch.isfinite(p).all() for p in c.learner_model.parameters())


def test_disabled_rollback_does_nothing(tmp_path: Path) -> None:
    c = build_components(tmp_path, LONG)
    controller, _ = _controller(c, enabled=False)
    assert not controller.check_loss(float("nan"), 1)
    assert not controller.observe_evaluation(5.0, 1) and not controller.observe_evaluation(0.0, 2)
    assert controller.total_rollbacks == 0


class _Adapter:
    """A stand-in for another algorithm's state adapter (e.g. DQN's)."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer = model, optimizer

    def create_files(self, step: int) -> list[CheckpointFile]:
        return [
            CheckpointFile.from_torch("model.pt", self.model.state_dict()),
            CheckpointFile.from_torch("optimizer.pt", self.optimizer.state_dict()),
            CheckpointFile.from_json("actor_state.json", {"steps": step}),
        ]

    def restore_for_rollback(self, checkpoint: Checkpoint) -> int:
        self.model.load_state_dict(checkpoint.load_torch("model.pt"))
        self.optimizer.load_state_dict(checkpoint.load_torch("optimizer.pt"))
        return int(checkpoint.read_json("actor_state.json")["steps"])


def test_generic_use_restores_and_scales_the_learning_rate(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    adapter = _Adapter(model, optimizer)
    manager = CheckpointManager(tmp_path)
    manager.save(adapter.create_files(50), step=50, elapsed_time=0.0, run_name="x")
    saved = weights(model)
    with torch.no_grad():
        model.weight.add_(1.0)
    sink = MemorySink()

    def restore(checkpoint: Checkpoint, lr_scale: float) -> int:
        step = adapter.restore_for_rollback(checkpoint)
        for group in optimizer.param_groups:
            group["lr"] = 0.01 * lr_scale
        return step

    controller = RollbackController(
        RollbackSettings(lr_factor=0.25), manager, restore, metrics=sink
    )
    assert controller.check_weights(model.parameters(), 60) is False
    with torch.no_grad():
        model.weight[0, 0] = math.inf
    assert controller.check_weights(model.parameters(), 70)
    assert_same_weights(weights(model), saved)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0025)
    assert sink.get("train/total_rollbacks") == 1.0

    restored = RollbackController(RollbackSettings(), manager, restore)
    restored.load_state_dict(json.loads(json.dumps(controller.state_dict())))
    assert restored.total_rollbacks == 1 and restored.lr_scale == 0.25


def test_rollback_during_a_run_is_counted_and_checkpointed(tmp_path: Path) -> None:
    """End to end: a NaN injected into the 6th rollout of a CartPole run is rolled back."""
    from oakemu_rl.experiments.ppo_experiment import PPOExperiment

    config = small_config(
        total_steps=4096,
        env={"num_envs": 4},
        ppo={"rollout_steps": 64, "minibatches": 2},
        checkpoint={"every_steps": 512},
        tester={"enabled": False},
    )
    experiment = PPOExperiment(config, tmp_path / "run", console=False, print_fn=lambda _: None)
    experiment.build()
    buffer = experiment.rollout_buffer
    original = buffer.compute_returns_and_advantages
    calls = [0]

    def poisoned(gamma: float, gae_lambda: float) -> None:
        calls[0] += 1
        if calls[0] == 6:
            buffer.rewards[0, 0] = math.nan
        original(gamma, gae_lambda)

    buffer.compute_returns_and_advantages = poisoned  # type: ignore[method-assign]
    summary = experiment.run()
    assert summary["total_rollbacks"] == 1
    assert summary["steps"] >= 4096 and summary["stop_reason"] == "step budget reached"
    assert summary["rollbacks"][0]["checkpoint_step"] == 1024
    latest = CheckpointManager(tmp_path / "run" / "checkpoints").latest()
    assert latest is not None and latest.manifest["total_rollbacks"] == 1
    assert json.loads((latest.path / "run_state.json").read_text())["total_rollbacks"] == 1
