"""PPOStateAdapter: restore_full equivalence, restore_for_rollback, and --resume of a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from oakemu_rl.ppo.state_adapter import PPOStateAdapter
from oakemu_rl.runtime.checkpoints import CheckpointError, CheckpointFile, CheckpointManager
from oakemu_rl.runtime.state_adapter import ACTOR_FILE, LEARNER_FILE, RUN_FILE
from oakemu_rl.trajectories.restart_pool import RestartPool
from ppo_testing import (
    Components,
    assert_same_weights,
    build_components,
    fill_buffer,
    small_config,
    weights,
)


def _train_for_real(c: Components) -> None:
    """Run the actor on the toy env with the real learner thread (two rollouts)."""
    c.learner.start()
    c.actor.run()
    c.handshake.stop()
    c.learner.join(10)
    assert not c.learner.running and c.learner.rollouts == 2


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    state = optimizer.state_dict()["state"]
    return [v for key in sorted(state) for v in state[key].values() if isinstance(v, torch.Tensor)]


def test_restore_full_is_equivalent_to_the_original(tmp_path: Path) -> None:
    config = small_config(total_steps=64)
    original = build_components(tmp_path / "a", config)
    _train_for_real(original)
    files = original.adapter.create_checkpoint_files(
        elapsed_time=12.5, total_rollbacks=2, run_name="run-a"
    )
    checkpoint = original.checkpoints.save(files, step=64, elapsed_time=12.5, run_name="run-a")

    # A fresh set of components, with other weights and nothing run.
    restored = build_components(tmp_path / "b", config, weight_seed=123)
    before = weights(restored.learner_model)
    assert not all(torch.equal(v, weights(original.learner_model)[k]) for k, v in before.items())
    meta = restored.adapter.restore_full(checkpoint)

    assert (meta.step, meta.total_rollbacks, meta.run_name) == (64, 2, "run-a")
    assert meta.elapsed_time == 12.5 and meta.rollouts == 2
    assert meta.learner_updates == original.learner.updates > 0
    assert_same_weights(weights(restored.learner_model), weights(original.learner_model))
    assert_same_weights(weights(restored.actor_model), weights(original.actor_model))
    for a, b in zip(
        _optimizer_tensors(restored.optimizer), _optimizer_tensors(original.optimizer), strict=True
    ):
        assert torch.equal(a, b)
    assert restored.learner.state_dict().keys() == original.learner.state_dict().keys()
    assert torch.equal(
        restored.learner.generator.get_state(), original.learner.generator.get_state()
    )
    assert restored.actor.runtime_state().to_dict() == original.actor.runtime_state().to_dict()
    assert restored.actor.total_episodes == original.actor.total_episodes == 16
    assert restored.context.rng_state() == original.context.rng_state()

    # Continuing from either gives identical results: the same update on the same rollout ...
    for c in (original, restored):
        fill_buffer(c, seed=9)
        c.learner.train_on_rollout()
    assert_same_weights(weights(restored.learner_model), weights(original.learner_model))
    # ... and the same sampled actions.
    obs = torch.randn(32, 2)
    a = original.actor_model.get_action_bundle(obs, generator=original.actor.generator)
    b = restored.actor_model.get_action_bundle(obs, generator=restored.actor.generator)
    assert torch.equal(a.actions, b.actions)


def test_restore_for_rollback_restores_only_learner_and_optimizer(tmp_path: Path) -> None:
    config = small_config(total_steps=1_000_000)
    c = build_components(tmp_path, config)
    fill_buffer(c, seed=1)
    c.learner.train_on_rollout()
    c.actor._steps = 500
    checkpoint = c.checkpoints.save(
        c.adapter.create_checkpoint_files(elapsed_time=0.0, total_rollbacks=0, run_name="r"),
        step=500,
        elapsed_time=0.0,
        run_name="r",
    )
    saved = weights(c.learner_model)
    fill_buffer(c, seed=2)
    c.learner.train_on_rollout()
    c.actor._steps = 900
    updates = c.learner.updates
    assert c.adapter.restore_for_rollback(checkpoint) == 500
    assert_same_weights(weights(c.learner_model), saved)
    assert c.actor.steps == 900 and c.learner.updates == updates  # counters move on


def test_a_dqn_checkpoint_is_refused_clearly(tmp_path: Path) -> None:
    c = build_components(tmp_path)
    checkpoint = c.checkpoints.save(
        [CheckpointFile.from_json("actor_state.json", {"steps": 1})],
        step=1,
        elapsed_time=0,
        run_name="x",
    )
    with pytest.raises(CheckpointError, match="not a PPO checkpoint"):
        c.adapter.restore_full(checkpoint)


def test_restart_pool_is_checkpointed(tmp_path: Path) -> None:
    c = build_components(tmp_path)
    pool = RestartPool(4)
    pool.add(b"\x01\x02", episode_return=3.0, episode_step=7)
    c.actor._restart_pool = pool
    files = c.adapter.create_checkpoint_files(elapsed_time=0, total_rollbacks=0, run_name="x")
    assert "restart_pool.json" in {f.name for f in files}
    checkpoint = c.checkpoints.save(files, step=1, elapsed_time=0, run_name="x")
    other = build_components(tmp_path / "o")
    other.actor._restart_pool = RestartPool(4)
    PPOStateAdapter(
        other.config, other.learner_model, other.container, other.actor_model, other.optimizer,
        other.actor, other.learner, None, None,
    ).restore_full(checkpoint)  # fmt: skip
    assert other.actor.restart_pool is not None and len(other.actor.restart_pool) == 1


@pytest.mark.parametrize("overlap", [False, True], ids=["waits", "overlaps"])
def test_run_resume_and_evaluate(tmp_path: Path, overlap: bool) -> None:
    """A short CartPole run, resumed with a bigger budget, then evaluated from its run dir;
    with overlapping collection too, whose checkpoints must be as consistent."""
    from oakemu_rl.experiments import (
        PPOExperiment,
        evaluate_checkpoint,
        find_checkpoint,
        read_algo,
    )

    config = small_config(
        total_steps=1024,
        checkpoint={"every_steps": 512},
        tester={"every_steps": 512, "episodes": 2, "num_envs": 2, "final_episodes": 2},
        ppo={"rollout_steps": 64, "overlap_collection": overlap},
    )
    run_dir = tmp_path / "run"
    lines: list[str] = []
    summary = PPOExperiment(config, run_dir, console=False, print_fn=lines.append).run()
    assert summary["algo"] == "ppo" and summary["steps"] == 1024 and summary["rollouts"] == 4
    assert summary["final_eval"]["episodes"] == 2 and summary["random_baseline"] is not None
    assert read_algo(run_dir) == "ppo"
    assert (run_dir / "config.yaml").is_file() and (run_dir / "summary.json").is_file()
    # Each checkpoint holds one moment: the actor stood at the checkpoint's step and the
    # learner had trained on exactly the rollouts that ended by then (256 steps each).
    checkpoints = CheckpointManager(run_dir / "checkpoints").list()
    assert sorted(c.step for c in checkpoints) == [512, 1024]
    for checkpoint in checkpoints:
        assert checkpoint.read_json(ACTOR_FILE)["steps"] == checkpoint.step
        assert checkpoint.read_json(RUN_FILE)["step"] == checkpoint.step
        assert checkpoint.load_torch(LEARNER_FILE)["rollouts"] == checkpoint.step // 256

    resumed = PPOExperiment.from_run_dir(
        run_dir, total_steps=2048, console=False, print_fn=lines.append
    )
    summary2 = resumed.run()
    assert resumed.restored is not None and resumed.restored.step == 1024
    assert summary2["resumed_from_step"] == 1024 and summary2["steps"] == 2048
    assert summary2["rollouts"] == 8 and summary2["updates"] == 2 * summary["updates"]
    assert any("resumed" in line for line in lines)
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 2048

    from oakemu_rl.experiments.evaluation import PolicyOptionError

    with pytest.raises(PolicyOptionError, match="epsilon applies to DQN agents"):
        evaluate_checkpoint(run_dir, episodes=3, epsilon=0.1)
    result = evaluate_checkpoint(find_checkpoint(run_dir, best=True), episodes=3)
    assert result.episodes == 3 and result.policy == "greedy"
