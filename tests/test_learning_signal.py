"""A well-scaled learning signal whatever the game YAML's weights: reward normalisation
(`reward_shaping: [{type: normalize}]`), PPO's value normalisation (PopArt), a lost life as
the end of bootstrapping (`episodic_life`), and PPO's explained variance. Real games on the
real emulator."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.dqn.replay_buffer import ReplayBuffer, Transition
from oakemu_rl.envs.multi_env import OakEmuMultiEnv
from oakemu_rl.experiments import DQNExperiment, PPOExperiment
from oakemu_rl.ppo.config import PPOExperimentConfiguration
from oakemu_rl.ppo.model import PPOModel
from oakemu_rl.ppo.rollout_buffer import compute_gae
from oakemu_rl.runtime.config_base import ConfigError
from oakemu_rl.runtime.env_lifecycle import EnvironmentState
from oakemu_rl.runtime.reward_shaping import (
    NormalizeReward,
    RewardShaper,
    RewardShapingPipeline,
)
from ppo_testing import build_components, fake_learner, small_config

pytestmark = pytest.mark.timeout(180)

RAM = {"type": "ram", "ram": ["ball_x", "ball_y", "paddle_x"], "frame_stack": 1}


class LivesRecorder(RewardShaper):
    """A shaper that leaves the reward as it is and records, per call, the env, the reward
    and the lives before and after the step (what `episodic_life` decides on)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, float, int | None, int | None, bool]] = []

    def __call__(self, reward: float, info: dict[str, Any], env_state: EnvironmentState) -> float:
        lives = info.get("lives")
        after = int(lives) if lives is not None else None
        start = env_state.episode_start
        self.calls.append((env_state.env_id, reward, env_state.last_lives, after, start))
        return reward


def _life_lost(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and after < before


def _feed(normaliser: NormalizeReward, env_id: int, rewards: list[float]) -> list[float]:
    """One episode of `rewards` on env `env_id`, as an actor would shape them."""
    state = EnvironmentState(env_id=env_id, rng=np.random.default_rng(0))
    out = []
    for reward in rewards:
        out.append(normaliser(reward, {}, state))
        state.episode_start = False
    return out


# -- reward normalisation -------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    episodes=st.lists(
        st.lists(st.just(0.0) | st.floats(1e-6, 1e4) | st.floats(-1e4, -1e-6), min_size=1),
        min_size=1,
        max_size=8,
    ),
    gamma=st.floats(0.0, 1.0),
)
def test_normalised_rewards_keep_their_signs(episodes: list[list[float]], gamma: float) -> None:
    """No mean is subtracted: every reward keeps its sign (0 stays 0) and the scale is
    positive, whatever the rewards and the discount."""
    normaliser = NormalizeReward(gamma, clip=10.0)
    for i, rewards in enumerate(episodes):
        shaped = _feed(normaliser, i % 3, rewards)
        assert normaliser.scale > 0
        for raw, out in zip(rewards, shaped, strict=True):
            assert np.sign(out) == np.sign(raw) and abs(out) <= 10.0


def test_normalised_returns_keep_their_sign_and_order() -> None:
    """Once the scale has settled, episodes with positive and negative returns come out
    divided by one positive number: each return keeps its sign and their order."""
    rng = np.random.default_rng(0)
    normaliser = NormalizeReward(0.99, clip=None)
    for i in range(300):  # the game's usual episodes: pickups and penalties
        _feed(normaliser, i % 4, list(rng.choice([0.0, 0.0, 1.0, -5.0], size=40)))
    scale = normaliser.scale
    assert scale > 1.0  # the returns spread wider than 1: rewards shrink
    episodes = {
        "big loss": [0.0, -5.0, 0.0, -5.0],
        "small loss": [1.0, 0.0, -5.0],
        "nothing": [0.0, 0.0, 0.0],
        "small win": [1.0, 0.0],
        "mixed win": [1.0, -5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        "big win": [1.0] * 8,
    }
    raw = {name: sum(r) for name, r in episodes.items()}
    normalised = {name: sum(_feed(normaliser, 0, r)) for name, r in episodes.items()}
    assert sorted(raw, key=raw.__getitem__) == sorted(normalised, key=normalised.__getitem__)
    for name in episodes:
        assert np.sign(normalised[name]) == np.sign(raw[name])
        assert normalised[name] == pytest.approx(raw[name] / scale, rel=1e-3, abs=1e-9)


def test_one_normalize_entry_at_most_and_its_discount() -> None:
    with pytest.raises(ConfigError, match="2 'normalize' entries; expected at most one"):
        DQNExperimentConfiguration.from_dict(
            {"reward_shaping": [{"type": "normalize"}, {"type": "normalize"}]}
        )
    with pytest.raises(ConfigError, match=r"reward_shaping\.0\.normalize\.clip"):
        PPOExperimentConfiguration.from_dict({"reward_shaping": [{"type": "normalize", "clip": 0}]})
    own, default = (
        PPOExperimentConfiguration.from_dict(
            {"reward_shaping": [{"type": "normalize", "gamma": 0.5}, {"type": "scale"}]}
        ).reward_shaping,
        PPOExperimentConfiguration.from_dict(
            {"reward_shaping": [{"type": "normalize"}]}
        ).reward_shaping,
    )
    first = RewardShapingPipeline.from_config(own, gamma=0.9).shapers[0]
    assert isinstance(first, NormalizeReward) and first.gamma == 0.5
    second = RewardShapingPipeline.from_config(default, gamma=0.9).shapers[0]
    assert isinstance(second, NormalizeReward) and second.gamma == 0.9
    with pytest.raises(ValueError, match="needs the algorithm's discount factor"):
        RewardShapingPipeline.from_config(default)


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_normalisation_statistics_survive_a_resume(tmp_path: Path, algo: str) -> None:
    """A real run on catch writes the scale to TensorBoard and its checkpoint; the resumed
    run starts from exactly the same scale (and, for PPO, the same value statistics)."""
    data: dict[str, Any] = {
        "game": "catch",
        "total_steps": 768,
        "torch_threads": 1,
        "env": {"num_envs": 2, "backend": "inline", "observation": RAM},
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": 768},
        "logging": {"console": False, "tensorboard": False, "log_every_steps": 128},
        # catch's rewards are +1 and -1: scaled up, they show the scale follows them.
        "reward_shaping": [{"type": "scale", "factor": 50.0}, {"type": "normalize"}],
    }
    if algo == "dqn":
        data |= {
            "model": {"mlp_hidden": [32], "head_hidden": 0},
            "learner": {"learning_starts": 64, "batch_size": 16},
            "replay": {"capacity": 1000},
        }
        experiment: DQNExperiment | PPOExperiment = DQNExperiment(
            DQNExperimentConfiguration.from_dict(data), tmp_path / "run", console=False
        )
    else:
        data["ppo"] = {"rollout_steps": 64, "epochs": 2, "value_normalization": True}
        experiment = PPOExperiment(
            PPOExperimentConfiguration.from_dict(data), tmp_path / "run", console=False
        )
    experiment.run()
    shaper = experiment.actor.reward_shaping.shapers[1]
    assert isinstance(shaper, NormalizeReward) and shaper.count == 768
    assert shaper.scale > 1.0  # returns of +-50 rewards spread far wider than 1
    logged = experiment.memory.get("reward/normalisation_scale")
    assert logged is not None and logged > 1.0
    saved = experiment.actor.reward_shaping.state_dict()

    resumed_type = DQNExperiment if algo == "dqn" else PPOExperiment
    resumed = resumed_type.from_run_dir(tmp_path / "run", total_steps=1024, console=False)
    resumed.build()
    try:
        assert resumed.restored is not None and resumed.restored.step == 768
        again = resumed.actor.reward_shaping.shapers[1]
        assert isinstance(again, NormalizeReward) and again.scale == shaper.scale
        assert resumed.actor.reward_shaping.state_dict() == saved
        if isinstance(experiment, PPOExperiment) and isinstance(resumed, PPOExperiment):
            before = experiment.learner.model.value_stats
            after = resumed.learner.model.value_stats
            assert before[0] == 768 and torch.equal(before, after)
    finally:
        resumed.close()


# -- episodic life ----------------------------------------------------------------------


def test_episodic_life_needs_lives(tmp_path: Path) -> None:
    config = DQNExperimentConfiguration.from_dict({
        "game": "gym:CartPole-v1",
        "total_steps": 50,
        "episodic_life": True,
        "env": {"num_envs": 1, "backend": "inline"},
        "tester": {"enabled": False},
        "logging": {"console": False, "tensorboard": False},
    })  # fmt: skip
    experiment = DQNExperiment(config, tmp_path / "run", console=False)
    experiment.build()
    try:
        with pytest.raises(ValueError, match="episodic_life: gym:CartPole-v1 reports no `lives`"):
            experiment.trainer.run()
    finally:
        experiment.close()


def test_episodic_life_on_a_game_without_lives_is_refused_before_it_starts(
    write_game: Callable[..., Path], tmp_path: Path
) -> None:
    game = write_game()
    spec = yaml.safe_load(game.read_text())
    del spec["data"]["lives"]
    game.write_text(yaml.safe_dump(spec, sort_keys=False))
    config = DQNExperimentConfiguration.from_dict({
        "game": str(game),
        "total_steps": 50,
        "episodic_life": True,
        "env": {"num_envs": 1, "backend": "inline"},
        "tester": {"enabled": False},
        "logging": {"console": False, "tensorboard": False},
    })  # fmt: skip
    with pytest.raises(ConfigError, match=r"episodic_life: .*counter\.yaml has no data variable"):
        DQNExperiment(config, tmp_path / "run", console=False).build()
    assert not (tmp_path / "run").exists()


def test_replay_n_step_targets_stop_at_a_lost_life() -> None:
    """By hand, n = 3, gamma = 0.5: a life lost on the second step (terminated for the
    learner) while the episode goes on."""
    buffer = ReplayBuffer(16, (1,), observation_dtype=np.float32, n_step=3, gamma=0.5)
    rewards = [1.0, 2.0, 4.0, 8.0, 16.0]
    for t, reward in enumerate(rewards):
        buffer.add(
            Transition(0, np.array([t], np.float32), 0, reward, np.array([t + 1], np.float32),
                       terminated=t == 1, truncated=t == 4, episode_start=t == 0)
        )  # fmt: skip
    stored = buffer.transitions()
    assert stored["observations"][:, 0].tolist() == [0, 1, 2, 3, 4]
    assert stored["returns"].tolist() == [1 + 0.5 * 2, 2, 4 + 0.5 * 8 + 0.25 * 16, 8 + 0.5 * 16, 16]
    assert stored["discounts"].tolist() == [0, 0, 0.125, 0.25, 0.5]
    # After the cut the stream goes on from the observation of the step after it.
    assert stored["next_observations"][:, 0].tolist() == [2, 2, 5, 5, 5]


def test_dqn_episodic_life_cuts_the_targets_where_a_life_is_lost(tmp_path: Path) -> None:
    """DQN on catch (one env, 3-step returns): every replay target, recomputed by hand
    from the rewards and lives of the steps, stops exactly at a lost life."""
    gamma, n = 0.9, 3
    config = DQNExperimentConfiguration.from_dict({
        "game": "catch",
        "total_steps": 500,
        "torch_threads": 1,
        "episodic_life": True,
        "env": {"num_envs": 1, "backend": "inline", "observation": RAM},
        "model": {"mlp_hidden": [16], "head_hidden": 0},
        "learner": {"learning_starts": 10**6, "gamma": gamma},
        "replay": {"capacity": 1000, "n_step": n},
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": 10**6},
        "logging": {"console": False, "tensorboard": False},
    })  # fmt: skip
    experiment = DQNExperiment(config, tmp_path / "run", console=False)
    experiment.build()
    recorder = LivesRecorder()
    experiment.trainer.reward_shaping.shapers.append(recorder)
    experiment.writer.start()
    try:
        experiment.trainer.run()
        experiment.trainer.replay_writer.drain()
        stored = experiment.trainer.replay_buffer.transitions()
    finally:
        experiment.close()
    calls = recorder.calls
    lost = [_life_lost(before, after) for _, _, before, after, _ in calls]
    starts = [start for *_, start in calls]
    mid_episode = [t for t in range(len(calls) - 1) if lost[t] and not starts[t + 1]]
    assert len(mid_episode) >= 3  # lives lost while the episode went on
    # Each episode ends where the next begins; catch's episodes end with the last life.
    ends = {t - 1 for t in range(1, len(calls)) if starts[t]}
    emitted = len(stored["returns"])
    assert emitted > 400
    for t in range(emitted):
        ret, discount = 0.0, gamma**n
        for j in range(n):
            ret += gamma**j * calls[t + j][1]
            if lost[t + j] or t + j in ends:
                discount = 0.0 if lost[t + j] else gamma ** (j + 1)
                break
        assert stored["returns"][t] == pytest.approx(ret, abs=1e-5), t
        assert stored["discounts"][t] == pytest.approx(discount), t


def test_ppo_episodic_life_cuts_gae_where_a_life_is_lost(tmp_path: Path) -> None:
    """PPO on catch: the rollout marks exactly the steps that lost a life as terminal, and
    its GAE equals one computed by hand that stops at each lost life."""
    config = small_config(
        game="catch",
        total_steps=256,
        episodic_life=True,
        env={"num_envs": 2, "observation": RAM},
        ppo={"rollout_steps": 128, "gamma": 0.9, "gae_lambda": 0.8},
    )
    c = build_components(
        tmp_path,
        config,
        env_factory=lambda: OakEmuMultiEnv(
            "catch", num_envs=2, backend="inline", seed=0, observation_config=config.env.observation
        ),
        observation_shape=(3,),
        num_actions=3,
        observation_dtype=np.uint8,
    )
    recorder = LivesRecorder()
    c.actor.reward_shaping.shapers.append(recorder)
    snapshots: list[dict[str, np.ndarray]] = []

    def keep() -> None:
        b = c.buffer
        b.compute_returns_and_advantages(0.9, 0.8)
        snapshots.append({
            "rewards": b.rewards.copy(), "values": b.values.copy(), "terminated": b.terminated.copy(),
            "truncated": b.truncated.copy(), "last": b.last_values.copy(),
            "trunc_values": b.truncation_values.copy(), "advantages": b.advantages.copy(),
        })  # fmt: skip

    learner = fake_learner(c.handshake, keep)
    c.actor.run()
    c.handshake.stop()
    learner.join(5)
    rollout = snapshots[0]
    checked_cuts = 0
    for env_id in range(2):
        steps = [call for call in recorder.calls if call[0] == env_id][:128]
        lost = np.array([_life_lost(before, after) for _, _, before, after, _ in steps])
        # The last life's loss also ends catch's episode: the others are mid-episode.
        assert (rollout["terminated"][:, env_id] == lost).all()
        checked_cuts += int(lost.sum())
        rewards, values = rollout["rewards"][:, env_id], rollout["values"][:, env_id]
        assert rewards.tolist() == pytest.approx([reward for _, reward, *_ in steps])
        advantage, expected = 0.0, np.zeros(128)
        for t in reversed(range(128)):
            if lost[t]:
                advantage = rewards[t] - values[t]  # nothing after a lost life
            else:
                if rollout["truncated"][t, env_id]:
                    following, advantage = rollout["trunc_values"][t, env_id], 0.0
                else:
                    following = values[t + 1] if t < 127 else rollout["last"][env_id]
                delta = rewards[t] + 0.9 * following - values[t]
                advantage = delta + 0.9 * 0.8 * advantage
            expected[t] = advantage
        assert rollout["advantages"][:, env_id] == pytest.approx(expected, abs=1e-4)
    assert checked_cuts >= 4


def test_gae_by_hand_stops_at_a_lost_life() -> None:
    """One env, five steps, a life lost on the second (terminated for the learner, the
    episode goes on): gamma = 0.5, lambda = 1."""
    rewards = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]], np.float32)
    values = np.array([[10.0], [20.0], [30.0], [40.0], [50.0]], np.float32)
    terminated = np.array([[False], [True], [False], [False], [False]])
    none = np.zeros_like(terminated)
    advantages, returns = compute_gae(
        rewards, values, terminated, none, np.zeros_like(rewards), np.array([60.0], np.float32),
        0.5, 1.0,
    )  # fmt: skip
    after = 4 + 0.5 * 8 + 0.25 * 16 + 0.125 * 60  # steps 2-4, bootstrapped from 60
    assert returns[:, 0].tolist() == pytest.approx(
        [1 + 0.5 * 2, 2, after, 8 + 0.5 * 16 + 0.25 * 60, 16 + 0.5 * 60]
    )
    assert advantages[:, 0].tolist() == pytest.approx((returns - values)[:, 0].tolist())


# -- PPO value normalisation and explained variance ---------------------------------------


def test_popart_keeps_predictions_while_its_statistics_change() -> None:
    torch.manual_seed(0)
    model = PPOModel((6,), 3, value_normalization=True)
    observations = torch.randn(32, 6)
    before = model.get_value(observations).detach().tolist()
    returns = 300.0 + 40.0 * torch.randn(512)
    model.update_value_statistics(returns)
    count, mean, variance = model.value_stats.tolist()
    assert count == 512 and mean == pytest.approx(float(returns.double().mean()))
    assert variance == pytest.approx(float(returns.double().var(unbiased=False)), rel=1e-6)
    assert model.get_value(observations).detach().tolist() == pytest.approx(before, abs=1e-3)
    # Two batches fold in as one would.
    more = -50.0 + 5.0 * torch.randn(256)
    model.update_value_statistics(more)
    both = torch.cat([returns, more]).double()
    assert model.value_stats.tolist() == pytest.approx(
        [768, float(both.mean()), float(both.var(unbiased=False))], rel=1e-6
    )
    assert model.get_value(observations).detach().tolist() == pytest.approx(before, abs=1e-3)
    # The head learns in normalised units: the returns map to mean 0, deviation 1.
    normalised = model.normalize_values(both.float())
    assert float(normalised.mean()) == pytest.approx(0.0, abs=1e-4)
    assert float(normalised.std(unbiased=False)) == pytest.approx(1.0, rel=1e-4)
    plain = PPOModel((6,), 3)
    assert "value_stats" not in plain.state_dict() and plain.value_moments() == (0.0, 1.0)
    with pytest.raises(RuntimeError, match="value_normalization=True"):
        plain.update_value_statistics(returns)


def test_ppo_logs_explained_variance_and_value_statistics(tmp_path: Path) -> None:
    """A real PPO run on catch with rewards 100 times the YAML's: the TensorBoard file has
    the explained variance of every rollout, and PopArt's statistics follow the returns."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = PPOExperimentConfiguration.from_dict({
        "game": "catch",
        "total_steps": 1024,
        "torch_threads": 1,
        "env": {"num_envs": 2, "backend": "inline", "observation": RAM},
        "ppo": {"rollout_steps": 128, "epochs": 2, "value_normalization": True},
        "reward_shaping": [{"type": "scale", "factor": 100.0}],
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": 1024},
        "logging": {"console": False, "tensorboard": True, "log_every_steps": 256},
    })  # fmt: skip
    experiment = PPOExperiment(config, tmp_path / "run", console=False)
    experiment.run()
    events = EventAccumulator(str(tmp_path / "run" / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/explained_variance", "train/value_norm_mean", "train/value_norm_std"} <= tags
    explained = [e.value for e in events.Scalars("train/explained_variance")]
    assert len(explained) == 4 and all(np.isfinite(explained)) and max(explained) <= 1.0
    stds = [e.value for e in events.Scalars("train/value_norm_std")]
    assert stds[-1] > 10.0  # the returns of +-100 rewards, not of +-1
    assert "reward/normalisation_scale" not in tags  # no normalize shaper, no scale


def test_checkpoints_of_older_versions_restore(tmp_path: Path) -> None:
    """An actor state written before reward normalisation existed (no `reward_shaping`
    entry), or by a configuration with other shapers, leaves the statistics fresh."""
    from oakemu_rl.runtime.env_lifecycle import ActorRuntimeState
    from oakemu_rl.runtime.episode_metrics import EpisodeTotals

    c = build_components(tmp_path, small_config(reward_shaping=[{"type": "normalize"}]))
    normaliser = c.actor.reward_shaping.shapers[0]
    assert isinstance(normaliser, NormalizeReward)
    _feed(normaliser, 0, [1.0, -2.0, 3.0])
    c.actor.restore_runtime_state(ActorRuntimeState(steps=7, totals=EpisodeTotals()))
    assert c.actor.steps == 7 and normaliser.count == 3  # nothing saved, nothing changed
    other = {"shapers": [{"kind": "ScaleReward", "state": {}}]}
    c.actor.reward_shaping.load_state_dict(other)
    assert normaliser.count == 3
    saved = c.actor.runtime_state()
    fresh = build_components(tmp_path, small_config(reward_shaping=[{"type": "normalize"}]))
    fresh.actor.restore_runtime_state(saved)
    again = fresh.actor.reward_shaping.shapers[0]
    assert isinstance(again, NormalizeReward) and again.scale == normaliser.scale
