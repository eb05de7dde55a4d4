"""PPOActor on a tiny deterministic env: columns, parking, bootstraps, counters, state."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from oakemu_rl.envs.multi_env import StepResult
from oakemu_rl.ppo.bc import BCMaterialisationSource, ReplayObservationCache
from ppo_testing import build_components, fake_learner, small_config


def _value(model: Any, obs: list[float]) -> float:
    with torch.no_grad():
        return float(model.get_value(torch.tensor([obs], dtype=torch.float32))[0])


def test_actor_fills_columns_parks_envs_and_bootstraps(tmp_path: Path) -> None:
    episodes: list[tuple[dict[str, float], int, bool]] = []
    c = build_components(
        tmp_path, episode_observer=lambda data, step, won: episodes.append((data, step, won))
    )
    snapshots: list[dict[str, np.ndarray]] = []

    def on_rollout() -> None:
        b = c.buffer
        assert b.full and c.actor.parked_envs > 0
        snapshots.append(
            {
                name: getattr(b, name).copy()
                for name in (
                    "observations",
                    "actions",
                    "log_probs",
                    "values",
                    "rewards",
                    "terminated",
                    "truncated",
                    "truncation_values",
                    "last_values",
                    "positions",
                )
            }
        )

    learner = fake_learner(c.handshake, on_rollout)
    c.actor.run()  # returns after total_steps (64 = 2 rollouts of 4 envs x 8 steps)
    c.handshake.stop()
    learner.join(5)

    assert len(snapshots) == 2 and c.actor.steps == 64
    model = c.actor_model
    first, second = snapshots
    assert (first["positions"] == 8).all()
    obs_t = np.round(first["observations"][..., 0] * 10).astype(int)
    # env 0 truncates at t=5; env 1 terminates at t=3 (see CountingEnv).
    assert obs_t[:, 0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2]
    assert obs_t[:, 1].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert first["truncated"][:, 0].tolist() == [0, 0, 0, 0, 1, 0, 0, 0]
    assert not first["terminated"][:, 0].any()
    assert first["terminated"][:, 1].tolist() == [0, 0, 1, 0, 0, 1, 0, 0]
    assert not first["truncated"][:, 1].any()
    # Truncation bootstraps from the value of the final observation (t=5) ...
    assert first["truncation_values"][4, 0] == pytest.approx(_value(model, [0.5, 0.0]), abs=1e-6)
    assert first["truncation_values"][4, 2] == pytest.approx(_value(model, [0.5, 2.0]), abs=1e-6)
    # ... and each full column from the value of the observation after it.
    assert first["last_values"][0] == pytest.approx(_value(model, [0.3, 0.0]), abs=1e-6)
    assert first["last_values"][1] == pytest.approx(_value(model, [0.2, 1.0]), abs=1e-6)
    # Rewards, log-probs and values belong to the stored actions and observations.
    np.testing.assert_array_equal(first["rewards"], (first["actions"] == 1).astype(np.float32))
    obs = torch.from_numpy(first["observations"].reshape(-1, 2))
    log_probs, _, values = model.evaluate_actions(
        obs, torch.from_numpy(first["actions"]).reshape(-1)
    )
    np.testing.assert_allclose(
        first["log_probs"].reshape(-1), log_probs.detach().numpy(), atol=1e-6
    )
    np.testing.assert_allclose(first["values"].reshape(-1), values.detach().numpy(), atol=1e-6)
    # The parked envs resume where they were: env 0 at t=3, env 1 at t=2.
    assert np.round(second["observations"][:3, 0, 0] * 10).tolist() == [3, 4, 0]
    assert np.round(second["observations"][:2, 1, 0] * 10).tolist() == [2, 0]
    assert second["truncated"][1, 0] and second["terminated"][0, 1]

    actor = c.actor
    assert actor.total_episodes == 16 and len(episodes) == 16
    assert actor.total_truncated == 6 and actor.total_losses == 10 and actor.total_wins == 0
    assert all(not won for _, _, won in episodes)
    assert episodes[-1][0]["episode/count"] == 16.0
    assert actor.trajectory_runtime.total_recorded == 16
    assert actor.result_queue_depth == 0 and actor.env is None  # closed at the end
    assert actor.restart_pool is None and actor.replay_observation_cache is None
    assert c.metrics.get("episode/return") is not None


def test_actor_properties_bc_refusal_and_runtime_state(tmp_path: Path) -> None:
    c = build_components(tmp_path)
    assert c.actor.replay_observation_cache is None
    # Materialising needs a cache and demonstrations: without them it is an error.
    with pytest.raises(ValueError, match="replay_observation_cache"):
        c.actor.set_bc_materialisation_source(BCMaterialisationSource())
    c.actor.set_bc_materialisation_source(None)

    learner = fake_learner(c.handshake, lambda: None)
    c.actor.run()
    c.handshake.stop()
    learner.join(5)
    state = c.actor.runtime_state()

    other = build_components(tmp_path / "other")
    from oakemu_rl.ppo.actor import PPOActor

    cache = ReplayObservationCache(8)
    with_cache = PPOActor(
        other.context, other.actor_model, other.container, other.buffer, other.handshake,
        replay_observation_cache=cache,
    )  # fmt: skip
    assert with_cache.replay_observation_cache is cache
    with pytest.raises(ValueError, match="demonstrations"):  # the context has none
        with_cache.set_bc_materialisation_source(BCMaterialisationSource())
    actor = PPOActor(
        other.context, other.actor_model, other.container, other.buffer, other.handshake
    )
    actor.restore_runtime_state(state)
    assert actor.steps == 64 and actor.total_episodes == 16 and actor.total_losses == 10
    assert actor.runtime_state().to_dict() == state.to_dict()
    obs = torch.randn(16, 2)
    a = c.actor_model.get_action_bundle(obs, generator=c.actor.generator).actions
    b = c.actor_model.get_action_bundle(obs, generator=actor.generator).actions
    assert torch.equal(a, b)  # the sampling RNG is restored too


def test_a_step_lost_with_its_worker_truncates_the_step_before(tmp_path: Path) -> None:
    c = build_components(tmp_path, small_config(env={"num_envs": 1}, ppo={"minibatches": 1}))
    actor, buffer = c.actor, c.buffer
    env = actor._envs.open()
    actor.lifecycle.request_reset(env, actor.lifecycle[0])
    for result in env.poll():
        actor._handle(env, result)
    actor._flush_inference(env)  # row 0 acted
    for _ in range(2):
        for result in env.poll():
            actor._handle(env, result)
        actor._flush_inference(env)  # rows 1, 2 acted
    assert buffer.positions[0] == 2 and buffer.has_pending_action(0)
    pending_value = float(buffer.values[2, 0])
    env.poll()  # the step in flight is "lost": its result never arrives
    lost = StepResult(0, np.zeros(2, np.float32), 0.0, False, True, {"worker_lost": True})
    actor._handle(env, lost)
    assert not buffer.has_pending_action(0) and buffer.positions[0] == 2
    assert buffer.truncated[1, 0] and buffer.truncation_values[1, 0] == pending_value
    assert actor.total_truncated == 1
    actor._envs.close()


def test_restart_pool_saves_states_and_starts_episodes_from_them(tmp_path: Path) -> None:
    from oakemu_rl.envs.multi_env import OakEmuMultiEnv

    config = small_config(
        game="catch",
        total_steps=640,
        env={
            "num_envs": 4,
            "observation": {
                "type": "ram",
                "ram": ["ball_x", "ball_y", "paddle_x"],
                "frame_stack": 1,
            },
        },
        restart_pool={
            "enabled": True,
            "capacity": 8,
            "save_every_steps": 10,
            "restart_probability": 1.0,
        },
    )
    c = build_components(
        tmp_path,
        config,
        env_factory=lambda: OakEmuMultiEnv(
            "catch", num_envs=4, backend="inline", seed=0, observation_config=config.env.observation
        ),
        observation_shape=(3,),
        num_actions=3,
        observation_dtype=np.uint8,
    )
    learner = fake_learner(c.handshake, lambda: None)
    c.actor.run()
    c.handshake.stop()
    learner.join(5)
    pool = c.actor.restart_pool
    assert pool is not None and 0 < len(pool) <= 8 and pool.total_added > len(pool)
    assert pool.total_sampled > 0  # episodes after the first ones start from saved states
    # Envs whose episode ended were reset from pool states.
    assert c.actor.total_episodes > 0
    assert any(s.start_point == "restart" for s in c.actor.lifecycle.states)


def _overlap_components(tmp_path: Path, wait_at: Any = None) -> Any:
    # 3 rollouts of 4 envs x 8 steps; the learner may train while the actor collects.
    config = small_config(total_steps=96, ppo={"overlap_collection": True})
    return build_components(tmp_path, config, wait_at=wait_at)


def test_overlapping_actor_collects_the_next_rollout_while_the_learner_trains(
    tmp_path: Path,
) -> None:
    c = _overlap_components(tmp_path)
    handed: list[Any] = []
    moved_on: list[bool] = []

    def train() -> None:
        buffer = c.handshake.rollout
        assert buffer is not None and buffer.full and buffer.end_step is not None
        handed.append((buffer, buffer.end_step, buffer.positions.copy()))
        # The actor goes on stepping envs into the other buffer meanwhile (in the
        # synchronous mode it would wait here for the release).
        deadline = time.monotonic() + 5
        while c.actor.steps <= buffer.end_step and time.monotonic() < deadline:
            time.sleep(0.001)
        moved_on.append(c.actor.steps > buffer.end_step)
        assert buffer.full, "the actor wrote into the buffer being trained on"

    learner = fake_learner(c.handshake, train)
    c.actor.run()
    c.handshake.stop()
    learner.join(5)

    assert c.actor.steps == 96 and len(handed) == 3
    # The last rollout ends the run, so nothing can be collected after it.
    assert moved_on[:2] == [True, True]
    buffers = [b for b, _, _ in handed]
    assert buffers[0] is c.buffer and buffers[1] is not c.buffer and buffers[2] is c.buffer
    assert [step for _, step, _ in handed] == [32, 64, 96]
    for _, _, positions in handed:
        assert (positions == 8).all()


def test_overlapping_actor_waits_for_the_rollouts_the_handshake_names(tmp_path: Path) -> None:
    c = _overlap_components(tmp_path, wait_at=lambda step: step == 64)  # a checkpoint at 64
    steps_while_training: list[tuple[int, int]] = []

    def train() -> None:
        buffer = c.handshake.rollout
        end = buffer.end_step
        time.sleep(0.2)  # time for the actor to run ahead if it does not wait
        steps_while_training.append((end, c.actor.steps))

    learner = fake_learner(c.handshake, train)
    c.actor.run()
    c.handshake.stop()
    learner.join(5)
    ends = dict(steps_while_training)
    assert ends[32] > 32  # overlapped
    assert ends[64] == 64  # waited: the actor was still at the hand-off step


def test_overlapping_actor_trains_with_the_real_learner_and_stops_cleanly(
    tmp_path: Path,
) -> None:
    c = _overlap_components(tmp_path)
    c.learner.start()
    c.actor.run()
    c.handshake.stop()
    c.learner.join(5)
    assert not c.learner.running
    # Every rollout was trained on (the actor waits for the last one before returning),
    # and the learning rate was annealed by the hand-off steps, not by later actor steps.
    assert c.learner.rollouts == 3
    assert c.learner.updates == 3 * 2 * 2
    assert c.actor.steps == 96
    assert c.learner.last_metrics["train/learning_rate"] == pytest.approx(
        c.learner.learning_rate(96)
    )


@pytest.mark.parametrize("batch_wait_s", [0.0005, 0.01])
def test_async_rollouts_pair_each_action_with_its_own_observations(
    tmp_path: Path, batch_wait_s: float
) -> None:
    """Catch in worker processes, results arriving in any order: in every stored column the
    basket moves from one observation to the next as the stored action says."""
    from oakemu_rl.runtime.env_owner import make_multi_env

    observation = {"type": "ram", "ram": ["ball_x", "ball_y", "paddle_x"], "frame_stack": 1}
    config = small_config(
        game="catch",
        total_steps=2048,
        env={
            "num_envs": 8,
            "backend": "process",
            "worker_nice": 0,  # idle workers would wait on the other xdist process
            "observation": observation,
            "batch_wait_s": batch_wait_s,
        },
        ppo={"rollout_steps": 64},
    )
    c = build_components(
        tmp_path,
        config,
        env_factory=lambda: make_multi_env(config),
        observation_shape=(3,),
        num_actions=3,
        observation_dtype=np.uint8,
    )
    columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def on_rollout() -> None:
        b = c.buffer
        columns.append((b.observations.copy(), b.actions.copy(), b.terminated | b.truncated))

    learner = fake_learner(c.handshake, on_rollout)
    c.actor.run()
    c.handshake.stop()
    learner.join(5)
    assert len(columns) == 4
    checked = 0
    for observations, actions, ended in columns:
        basket = observations[..., 2].astype(int)
        moves = np.sign(basket[1:] - basket[:-1])
        # none, O (left), P (right); a basket at the edge cannot move further.
        expected = np.select([actions[:-1] == 1, actions[:-1] == 2], [-1, 1], 0)
        at_edge = ((actions[:-1] == 1) & (basket[:-1] == 0)) | (
            (actions[:-1] == 2) & (basket[:-1] >= 26)
        )
        valid = ~ended[:-1] & ~at_edge
        assert (moves[valid] == expected[valid]).all()
        checked += int(valid.sum())
    assert checked > 1500


def _catch_rollout_rewards(tmp_path: Path, reward_shaping: list[dict[str, Any]]) -> np.ndarray:
    """The rewards PPOActor stores in 4 rollouts (4 envs x 32 steps) of catch."""
    from oakemu_rl.envs.multi_env import OakEmuMultiEnv

    config = small_config(
        game="catch",
        total_steps=512,
        env={
            "num_envs": 4,
            "observation": {"type": "ram", "ram": ["ball_x", "ball_y", "paddle_x"]},
        },
        ppo={"rollout_steps": 32},
        reward_shaping=reward_shaping,
    )
    c = build_components(
        tmp_path,
        config,
        env_factory=lambda: OakEmuMultiEnv(
            "catch", num_envs=4, backend="inline", seed=0, observation_config=config.env.observation
        ),
        observation_shape=(3 * config.env.observation.frame_stack,),
        num_actions=3,
        observation_dtype=np.uint8,
    )
    assert len(c.actor.reward_shaping) == len(reward_shaping)
    rewards: list[np.ndarray] = []
    learner = fake_learner(c.handshake, lambda: rewards.append(c.buffer.rewards.copy()))
    c.actor.run()
    c.handshake.stop()
    learner.join(5)
    assert len(rewards) == 4
    return np.stack(rewards)


def test_reward_shaping_shapes_the_rewards_ppo_stores(tmp_path: Path) -> None:
    """The configuration's reward_shaping acts in PPO as in DQN: on catch (+1 a catch, -1 a
    miss, which costs a life) a zero scale leaves only the life-loss penalty, which sees
    the lives before each step."""
    plain = _catch_rollout_rewards(tmp_path / "plain", [])
    assert (plain > 0).any() and (plain < 0).any()
    assert set(np.unique(plain).tolist()) <= {-1.0, 0.0, 1.0}
    zero = _catch_rollout_rewards(tmp_path / "zero", [{"type": "scale", "factor": 0.0}])
    assert not zero.any()
    shaped = _catch_rollout_rewards(
        tmp_path / "shaped",
        [{"type": "scale", "factor": 0.0}, {"type": "life_loss", "penalty": 5.0}],
    )
    # Same seeds, same weights, rewards do not steer the actor: the same steps, and each
    # lost life (a miss, reward -1) is -5 after shaping, every other step 0.
    np.testing.assert_array_equal(shaped, np.where(plain < 0, -5.0, 0.0).astype(np.float32))
