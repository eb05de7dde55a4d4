"""PPO building blocks: GAE by hand, the rollout buffer's columns, the model, the config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from oakemu_rl.dqn.config import ConfigError
from oakemu_rl.ppo.bc import BCMaterialisationSource, ReplayObservationCache
from oakemu_rl.ppo.config import PPOExperimentConfiguration
from oakemu_rl.ppo.model import PPOModel
from oakemu_rl.ppo.rollout_buffer import RolloutBuffer, compute_gae
from oakemu_rl.runtime.config_base import (
    ClipShaper,
    CodeNotAllowedError,
    ScaleShaper,
    SignShaper,
)
from oakemu_rl.trajectories.restart_pool import RestartPool

GAMMA, LAMBDA = 0.9, 0.8

# Two envs, three steps each (time-major rows).
# env 0: rewards 1, 2, 3; values .5, .6, .7; step 1 TERMINATES; the column ends with a
#        running episode whose next value is 0.8.
# env 1: rewards 0, 1, 1; values 1, 2, 3; step 0 is TRUNCATED with final-observation
#        value 5; the column ends with a running episode whose next value is 4.
REWARDS = np.array([[1, 0], [2, 1], [3, 1]], dtype=np.float32)
VALUES = np.array([[0.5, 1.0], [0.6, 2.0], [0.7, 3.0]], dtype=np.float32)
TERMINATED = np.array([[0, 0], [1, 0], [0, 0]], dtype=bool)
TRUNCATED = np.array([[0, 1], [0, 0], [0, 0]], dtype=bool)
TRUNCATION_VALUES = np.array([[0, 5.0], [0, 0], [0, 0]], dtype=np.float32)
LAST_VALUES = np.array([0.8, 4.0], dtype=np.float32)


def hand_advantages() -> np.ndarray:
    # env 0, backwards:
    a02 = 3 + 0.9 * 0.8 - 0.7  # 3.02: bootstraps from the column's last value
    a01 = 2 + 0.0 - 0.6  # 1.4: terminated, no bootstrap, chain cut
    a00 = (1 + 0.9 * 0.6 - 0.5) + 0.9 * 0.8 * a01  # 1.04 + 1.008 = 2.048
    # env 1, backwards:
    a12 = 1 + 0.9 * 4.0 - 3.0  # 1.6
    a11 = (1 + 0.9 * 3.0 - 2.0) + 0.9 * 0.8 * a12  # 1.7 + 1.152 = 2.852
    a10 = 0 + 0.9 * 5.0 - 1.0  # 3.5: truncated, bootstraps from the final value, chain cut
    return np.array([[a00, a10], [a01, a11], [a02, a12]], dtype=np.float32)


def test_gae_matches_hand_computation_with_termination_and_truncation() -> None:
    advantages, returns = compute_gae(
        REWARDS, VALUES, TERMINATED, TRUNCATED, TRUNCATION_VALUES, LAST_VALUES, GAMMA, LAMBDA
    )
    expected = hand_advantages()
    np.testing.assert_allclose(advantages, expected, rtol=1e-6)
    np.testing.assert_allclose(returns, expected + VALUES, rtol=1e-6)
    assert advantages[2, 0] == pytest.approx(3.02)
    assert advantages[0, 0] == pytest.approx(2.048)
    assert advantages[0, 1] == pytest.approx(3.5)


def test_rollout_buffer_fills_columns_out_of_order_and_computes_the_same_gae() -> None:
    buffer = RolloutBuffer(3, 2, (1,), np.float32)
    # Env 1 runs ahead of env 0: columns fill independently.
    order = [1, 1, 0, 1, 0, 0]
    rows = {0: 0, 1: 0}
    for env_id in order:
        t = rows[env_id]
        buffer.add_action(env_id, np.array([t], np.float32), 1, -0.5, float(VALUES[t, env_id]))
        row = buffer.add_outcome(
            env_id,
            float(REWARDS[t, env_id]),
            bool(TERMINATED[t, env_id]),
            bool(TRUNCATED[t, env_id]),
        )
        assert row == t
        if TRUNCATED[t, env_id]:
            buffer.set_truncation_value(env_id, row, float(TRUNCATION_VALUES[t, env_id]))
        rows[env_id] += 1
        if env_id == 1 and rows[1] == 3:
            assert buffer.column_full(1) and not buffer.full
    assert buffer.full and buffer.size == 6
    for env_id in (0, 1):
        buffer.set_last_value(env_id, float(LAST_VALUES[env_id]))
    buffer.compute_returns_and_advantages(GAMMA, LAMBDA)
    np.testing.assert_allclose(buffer.advantages, hand_advantages(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="full"):
        buffer.add_action(0, np.zeros(1, np.float32), 0, 0.0, 0.0)

    batches = list(buffer.minibatches(2, torch.Generator().manual_seed(0)))
    assert [len(b.actions) for b in batches] == [3, 3]
    seen = torch.cat([b.advantages for b in batches]).sort().values
    np.testing.assert_allclose(seen.numpy(), np.sort(hand_advantages().reshape(-1)), rtol=1e-6)

    buffer.reset()
    assert buffer.size == 0 and not buffer.full and not buffer.truncated.any()


def test_rollout_buffer_rejects_incomplete_rollouts_and_unpaired_calls() -> None:
    buffer = RolloutBuffer(2, 2, (1,))
    with pytest.raises(RuntimeError, match="without an action"):
        buffer.add_outcome(0, 1.0, False, False)
    buffer.add_action(0, np.zeros(1, np.float32), 0, 0.0, 0.0)
    with pytest.raises(RuntimeError, match="without an outcome"):
        buffer.add_action(0, np.zeros(1, np.float32), 0, 0.0, 0.0)
    with pytest.raises(RuntimeError, match="not full"):
        buffer.compute_returns_and_advantages(0.99, 0.95)


def test_empty_like_is_a_separate_buffer_and_reset_forgets_the_hand_off_step() -> None:
    buffer = RolloutBuffer(2, 3, (2,), np.uint8)
    buffer.add_action(0, np.ones(2, np.uint8), 1, -0.5, 0.25)
    buffer.end_step = 40
    spare = buffer.empty_like()
    assert (spare.num_steps, spare.num_envs, spare.observation_shape) == (2, 3, (2,))
    assert spare.observations.dtype == np.uint8 and spare.device == buffer.device
    assert spare.end_step is None and spare.size == 0
    assert not np.shares_memory(spare.observations, buffer.observations)
    buffer.reset()
    assert buffer.end_step is None


def test_terminated_wins_over_truncated() -> None:
    buffer = RolloutBuffer(1, 1, (1,))
    buffer.add_action(0, np.zeros(1, np.float32), 0, 0.0, 1.0)
    buffer.add_outcome(0, 2.0, terminated=True, truncated=True)
    buffer.set_last_value(0, 100.0)
    buffer.compute_returns_and_advantages(0.5, 0.5)
    assert buffer.advantages[0, 0] == pytest.approx(1.0)  # 2 - 1, no bootstrap at all


# -- model ----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4,), (2, 48, 48)])
def test_action_bundle_shapes_and_consistency(shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    model = PPOModel(shape, 3)
    dtype = torch.uint8 if len(shape) == 3 else torch.float32
    obs = torch.randint(0, 255, (5, *shape)).to(dtype)
    bundle = model.get_action_bundle(obs, generator=torch.Generator().manual_seed(1))
    assert bundle.actions.shape == bundle.log_probs.shape == bundle.values.shape == (5,)
    assert bundle.entropy.shape == (5,)
    log_probs, entropy, values = model.evaluate_actions(obs, bundle.actions)
    torch.testing.assert_close(log_probs, bundle.log_probs)
    torch.testing.assert_close(entropy, bundle.entropy)
    torch.testing.assert_close(values, bundle.values)
    # Near-uniform initial policy (small policy-head gain).
    assert torch.allclose(bundle.entropy, torch.full((5,), float(np.log(3))), atol=0.05)
    # The same generator seed gives the same actions.
    again = model.get_action_bundle(obs, generator=torch.Generator().manual_seed(1))
    assert torch.equal(again.actions, bundle.actions)
    greedy = model.get_action_bundle(obs, deterministic=True)
    assert torch.equal(greedy.actions, model.greedy_actions(obs))


def test_action_masking_static_and_per_row() -> None:
    torch.manual_seed(0)
    model = PPOModel((4,), 4, allowed_actions=[1, 3])
    obs = torch.randn(64, 4)
    bundle = model.get_action_bundle(obs)
    assert set(bundle.actions.tolist()) <= {1, 3}
    assert torch.isfinite(bundle.entropy).all()
    assert bool((bundle.entropy <= float(np.log(2)) + 1e-5).all())
    row_mask = torch.zeros(64, 4, dtype=torch.bool)
    row_mask[:, 3] = True
    only3 = model.get_action_bundle(obs, row_mask)
    assert only3.actions.eq(3).all()
    assert torch.allclose(only3.log_probs, torch.zeros(64), atol=1e-6)
    assert model.greedy_actions(obs).remainder(2).eq(1).all()
    with pytest.raises(ValueError, match="subset"):
        PPOModel((4,), 4, allowed_actions=[7])


def test_sampling_follows_the_policy_distribution() -> None:
    torch.manual_seed(0)
    model = PPOModel((2,), 4, allowed_actions=[0, 1, 3])
    with torch.no_grad():
        model.policy_head.weight.zero_()
        model.policy_head.bias.copy_(torch.tensor([0.0, 1.0, 5.0, 2.0]))
    obs = torch.zeros(40_000, 2)
    bundle = model.get_action_bundle(obs, generator=torch.Generator().manual_seed(3))
    counts = torch.bincount(bundle.actions, minlength=4).double() / len(obs)
    expected = torch.softmax(torch.tensor([0.0, 1.0, -1e8, 2.0]), 0).double()
    assert counts[2] == 0  # masked: never drawn
    torch.testing.assert_close(counts, expected, atol=0.01, rtol=0)
    torch.testing.assert_close(bundle.log_probs, expected.log()[bundle.actions].float())


def test_uint8_inputs_are_scaled_and_input_scale_overrides() -> None:
    ram = torch.tensor([[30, 20, 10]], dtype=torch.uint8)
    default = PPOModel((3,), 2)  # uint8: / 255; floats as they are
    torch.testing.assert_close(default.get_value(ram), default.get_value(ram.float() / 255))
    scaled = PPOModel((3,), 2, input_scale=1 / 32)  # any dtype: x / 32
    torch.testing.assert_close(scaled.get_value(ram), scaled.get_value(ram.float()))
    scaled.input_scale = None
    assert not torch.allclose(scaled.get_value(ram), scaled.get_value(ram.float()))


# -- config ---------------------------------------------------------------------------------


def test_config_defaults_round_trip_through_yaml(tmp_path: Path) -> None:
    config = PPOExperimentConfiguration()
    assert config.algo == "ppo" and config.game == "catch"
    assert config.rollout_size == config.env.num_envs * config.ppo.rollout_steps
    path = tmp_path / "ppo.yaml"
    path.write_text(config.to_yaml())
    assert PPOExperimentConfiguration.from_yaml(path) == config
    changed = config.with_overrides(total_steps=1234, seed=None)
    assert changed.total_steps == 1234 and changed.seed == config.seed


def test_config_errors_name_the_file_the_field_and_the_value(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("ppo:\n  clip_coef: -1\n  epochz: 3\nenv:\n  num_envs: many\n")
    with pytest.raises(ConfigError) as info:
        PPOExperimentConfiguration.from_yaml(path)
    text = str(info.value)
    assert str(path) in text
    assert "ppo.clip_coef" in text and "-1" in text
    assert "ppo.epochz: unknown setting" in text
    assert "env.num_envs" in text and "'many'" in text
    with pytest.raises(ConfigError, match="restart pools need an OakEmu game"):
        PPOExperimentConfiguration.from_dict(
            {"game": "gym:CartPole-v1", "restart_pool": {"enabled": True}}
        )
    with pytest.raises(ConfigError, match="minibatches"):
        PPOExperimentConfiguration.from_dict(
            {"env": {"num_envs": 1}, "ppo": {"rollout_steps": 2, "minibatches": 4}}
        )
    with pytest.raises(ConfigError, match="not found"):
        PPOExperimentConfiguration.from_yaml(tmp_path / "missing.yaml")


def test_old_ppo_reward_settings_load_as_reward_shaping(tmp_path: Path) -> None:
    """A config.yaml written before reward shaping was shared (ppo.reward_scale and
    ppo.reward_clip, as an old run directory holds it) loads into reward_shaping."""
    defaults = (
        PPOExperimentConfiguration()
        .to_yaml()
        .replace(
            "  normalize_advantages: true\n",
            "  normalize_advantages: true\n  reward_scale: 1.0\n  reward_clip: null\n",
        )
    )
    assert "reward_clip: null" in defaults  # as an old run's config.yaml has them
    path = tmp_path / "config.yaml"
    path.write_text(defaults)
    config = PPOExperimentConfiguration.from_yaml(path)
    assert config == PPOExperimentConfiguration()  # the defaults vanish
    assert config.reward_shaping == [] and "reward_clip" not in config.to_yaml()

    path.write_text("ppo:\n  reward_scale: 0.5\n  reward_clip: 1.0\n  epochs: 3\n")
    config = PPOExperimentConfiguration.from_yaml(path)
    assert config.ppo.epochs == 3
    assert config.reward_shaping == [
        ScaleShaper(type="scale", factor=0.5),
        ClipShaper(type="clip", min=-1.0, max=1.0),
    ]
    # The same as the new form, and written in the new form.
    new = PPOExperimentConfiguration.from_dict(
        {
            "ppo": {"epochs": 3},
            "reward_shaping": [{"type": "scale", "factor": 0.5}, {"type": "clip", "max": 1.0}],
        }
    )
    assert config == new
    assert PPOExperimentConfiguration.from_yaml(_written(tmp_path, config)) == config
    clip_only = PPOExperimentConfiguration.from_dict({"ppo": {"reward_clip": 2, "reward_scale": 1}})
    assert clip_only.reward_shaping == [ClipShaper(type="clip", min=-2.0, max=2.0)]
    data = {"ppo": {"reward_clip": 1.0}}
    PPOExperimentConfiguration.from_dict(data)
    assert data == {"ppo": {"reward_clip": 1.0}}  # the caller's mapping is not changed

    with pytest.raises(ConfigError, match=r"ppo\.reward_clip and reward_shaping are set"):
        PPOExperimentConfiguration.from_dict(
            {"ppo": {"reward_clip": 1.0}, "reward_shaping": [{"type": "sign"}]}
        )
    with pytest.raises(ConfigError, match=r"ppo\.reward_scale and reward_shaping are set"):
        PPOExperimentConfiguration.from_dict(
            {
                "ppo": {"reward_scale": 2.0, "reward_clip": None},
                "reward_shaping": [{"type": "sign"}],
            }
        )
    # Defaults alongside reward_shaping are no conflict: they say nothing.
    both = PPOExperimentConfiguration.from_dict(
        {"ppo": {"reward_scale": 1.0, "reward_clip": None}, "reward_shaping": [{"type": "sign"}]}
    )
    assert both.reward_shaping == [SignShaper(type="sign")]
    with pytest.raises(ConfigError, match=r"ppo\.reward_clip: expected a positive number"):
        PPOExperimentConfiguration.from_dict({"ppo": {"reward_clip": -1.0}})
    with pytest.raises(ConfigError, match=r"clip: min 1\.0 is above max -1\.0"):
        PPOExperimentConfiguration.from_dict(
            {"reward_shaping": [{"type": "clip", "min": 1, "max": -1}]}
        )


def test_a_callable_reward_shaper_in_ppo_is_code_that_must_be_allowed() -> None:
    config = PPOExperimentConfiguration.from_dict(
        {"reward_shaping": [{"type": "sign"}, {"type": "callable", "target": "mod:shape"}]}
    )
    assert config.code_references() == ["reward_shaping[1] calls 'mod:shape'"]
    with pytest.raises(CodeNotAllowedError, match="--allow-code"):
        config.check_code_allowed(False)
    config.check_code_allowed(True)


def _written(tmp_path: Path, config: PPOExperimentConfiguration) -> Path:
    path = tmp_path / "written.yaml"
    path.write_text(config.to_commented_yaml())
    assert "reward_clip" not in path.read_text()
    return path


# -- small classes ---------------------------------------------------------------------------


def test_replay_observation_cache_is_bounded_lru_and_copies() -> None:
    cache = ReplayObservationCache(max_bytes=8)  # two observations of 4 bytes
    obs = np.arange(4, dtype=np.uint8)
    cache.put(7, 0, obs)
    obs[:] = 99  # the cache holds its own copy
    cache.put(7, 1, obs)
    assert cache.get(7, 0) is not None and cache.get(7, 0)[0] == 0  # type: ignore[index]
    cache.put(8, 0, obs)  # evicts (7, 1): (7, 0) was used more recently
    assert (7, 1) not in cache and (7, 0) in cache and len(cache) == 2 and cache.nbytes == 8
    assert cache.get(7, 1) is None and cache.misses == 1
    assert cache.missing([(7, 0), (9, 9)]) == [(9, 9)]
    assert cache.discard_trajectory(7) == 1 and len(cache) == 1 and cache.nbytes == 4


def test_bc_materialisation_source_queue() -> None:
    source = BCMaterialisationSource(max_pending=2)
    assert source.request(1, [0, 1]) and source.request(2, (5,))
    assert not source.request(3, [0])  # full
    assert source.pending == 2
    taken = source.take()
    assert [(r.trajectory_id, r.steps) for r in taken] == [(1, (0, 1)), (2, (5,))]
    source.close()
    assert not source.request(4, [0]) and source.closed


def test_restart_pool_by_return_keeps_the_best_and_samples() -> None:
    pool = RestartPool(capacity=2, priority="return")
    assert pool.sample(np.random.default_rng(0)) is None
    assert pool.add(b"a", episode_return=1.0, episode_step=10)
    assert pool.add(b"b", episode_return=3.0, episode_step=20)
    assert not pool.add(b"c", episode_return=0.5, episode_step=5)  # worse than all
    assert pool.add(b"d", episode_return=2.0, episode_step=15)  # replaces a
    rng = np.random.default_rng(0)
    states = {pool.sample(rng).state for _ in range(50)}  # type: ignore[union-attr]
    assert states == {b"b", b"d"}
    restored = RestartPool(capacity=2, priority="return")
    restored.load_state_dict(pool.state_dict())
    assert len(restored) == 2 and restored.best_return == 3.0


@pytest.mark.parametrize("form", ["max", "clipped"])
def test_value_loss_forms(tmp_path: Path, form: str) -> None:
    from ppo_testing import build_components, fill_buffer, small_config

    config = small_config(
        ppo={"epochs": 1, "minibatches": 1, "value_clip_coef": 0.2, "value_loss_form": form}
    )
    c = build_components(tmp_path, config)
    fill_buffer(c)
    b = c.buffer
    # The stored values are off from the model's by -1 and +1 alternately, far beyond the
    # clip range, so the clipped prediction stays 0.2 from the stored one.
    b.values += np.where(np.arange(b.num_envs) % 2 == 0, 1.0, -1.0).astype(np.float32)
    b.compute_returns_and_advantages(config.ppo.gamma, config.ppo.gae_lambda)
    with torch.no_grad():
        new = c.learner_model.get_value(torch.from_numpy(b.observations.reshape(-1, 2)))
    old, returns = torch.from_numpy(b.values.reshape(-1)), torch.from_numpy(b.returns.reshape(-1))
    clipped = old + (new - old).clamp(-0.2, 0.2)
    errors = (clipped - returns) ** 2
    if form == "max":
        errors = torch.max(errors, (new - returns) ** 2)
    metrics = c.learner.train_on_rollout()
    assert metrics["train/value_loss"] == pytest.approx(float(0.5 * errors.mean()), rel=1e-5)
