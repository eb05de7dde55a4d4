"""DQN building blocks: model, noisy layers, exploration, action masking, ActionPolicy,
reward shaping and the configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from oakemu_rl.dqn.action_masker import ActionMasker
from oakemu_rl.dqn.action_policy import ActionPolicy
from oakemu_rl.dqn.config import ConfigError, DQNExperimentConfiguration
from oakemu_rl.dqn.exploration import (
    ExplorationStrategy,
    ExponentialEpsilonGreedy,
    LinearEpsilonGreedy,
    NoisyNetExploration,
)
from oakemu_rl.dqn.model import DQNModel
from oakemu_rl.dqn.noisy import NoisyLinear
from oakemu_rl.runtime.env_lifecycle import EnvironmentState
from oakemu_rl.runtime.reward_shaping import (
    ClipReward,
    LifeLossPenalty,
    RewardShapingPipeline,
    ScaleReward,
    SignReward,
)
from oakemu_rl.runtime.thread_safe_model import ThreadSafeModel


def double_reward(reward: float, info: dict[str, Any], factor: float = 2.0) -> float:
    return reward * factor


# -- model ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "torso"),
    [((2, 48, 48), "small_cnn"), ((4, 84, 84), "nature_cnn"), ((4,), "mlp"), ((1, 23, 32), "auto")],
)
def test_model_shapes(shape: tuple[int, ...], torso: Any) -> None:
    model = DQNModel(shape, 5, torso=torso)
    obs = torch.zeros((3, *shape), dtype=torch.uint8 if len(shape) == 3 else torch.float32)
    assert model(obs).shape == (3, 5)


def test_dueling_head_and_uint8_scaling() -> None:
    torch.manual_seed(0)
    model = DQNModel((1, 24, 24), 3, dueling=True)
    obs = torch.randint(0, 256, (2, 1, 24, 24), dtype=torch.uint8)
    torch.testing.assert_close(model(obs), model(obs.float() / 255.0))
    features = model.torso(obs.float() / 255.0)
    advantage, value = model.advantage(features), model.value(features)  # type: ignore[misc]
    torch.testing.assert_close(model(obs), value + advantage - advantage.mean(1, keepdim=True))
    with pytest.raises(ValueError, match="nature_cnn"):
        DQNModel((1, 24, 24), 3, torso="nature_cnn")
    with pytest.raises(ValueError, match="needs"):
        DQNModel((4,), 3, torso="small_cnn")


def test_noisy_layers_reset_noise_and_are_deterministic_in_eval() -> None:
    torch.manual_seed(0)
    model = DQNModel((4,), 3, noisy=True)
    assert any(isinstance(m, NoisyLinear) for m in model.modules())
    x = torch.ones(1, 4)
    first = model(x)
    torch.testing.assert_close(model(x), first)  # noise held until reset
    model.reset_noise()
    assert not torch.allclose(model(x), first)
    model.eval()
    mean = model(x)
    model.reset_noise()
    torch.testing.assert_close(model(x), mean)
    layer = NoisyLinear(3, 2)
    assert "weight_epsilon" not in layer.state_dict()  # noise is not part of the weights


# -- exploration ---------------------------------------------------------------------------------


def test_epsilon_schedules() -> None:
    linear = LinearEpsilonGreedy(1.0, 0.1, 1000)
    assert linear.value(0) == 1.0
    assert linear.value(500) == pytest.approx(0.55)
    assert linear.value(1000) == pytest.approx(0.1) == linear.value(10**6)
    exponential = ExponentialEpsilonGreedy(1.0, 0.05, 1000)
    assert exponential.value(0) == pytest.approx(1.0)
    assert exponential.value(1000) == pytest.approx(0.05 + 0.95 * 0.01)
    assert exponential.value(500) > exponential.value(600) > 0.05
    rng = np.random.default_rng(0)
    draws = [linear.should_explore(500, rng) for _ in range(4000)]
    assert np.mean(draws) == pytest.approx(0.55, abs=0.03)
    noisy = NoisyNetExploration()
    assert noisy.value(5) is None and not noisy.should_explore(5, rng)
    assert noisy.should_reset_noise(0, 4) and not noisy.should_reset_noise(2, 4)
    assert noisy.should_reset_noise(4, 4)
    config = DQNExperimentConfiguration.from_dict({"exploration": {"type": "exponential"}})
    assert isinstance(
        ExplorationStrategy.from_settings(config.exploration), ExponentialEpsilonGreedy
    )


def test_action_masker() -> None:
    masker = ActionMasker(5, [1, 3])
    rng = np.random.default_rng(0)
    assert set(masker.sample(rng) for _ in range(200)) == {1, 3}
    q = torch.tensor([[9.0, 1.0, 0.0, 2.0, 8.0], [0.0, 5.0, 0.0, 1.0, 0.0]])
    np.testing.assert_array_equal(masker.greedy(q), [3, 1])
    np.testing.assert_array_equal(ActionMasker(5).greedy(q), [0, 1])
    with pytest.raises(ValueError):
        ActionMasker(3, [3])


# -- ActionPolicy ------------------------------------------------------------------------------------


class FakeEnv:
    def __init__(self) -> None:
        self.submitted: list[tuple[int, int]] = []

    def submit(self, env_id: int, action: int) -> None:
        self.submitted.append((env_id, action))


def make_policy(
    strategy: ExplorationStrategy, learning_starts: int = 10, noisy: bool = False
) -> tuple[ActionPolicy, dict[str, Any]]:
    record: dict[str, Any] = {"queued": [], "random_steps": 0}
    actor = DQNModel((4,), 3, noisy=noisy)
    learner = DQNModel((4,), 3, noisy=noisy)
    container: ThreadSafeModel[DQNModel] = ThreadSafeModel(learner)

    def queue(env_id: int, obs: np.ndarray) -> None:
        record["queued"].append(env_id)

    def random_step() -> None:
        record["random_steps"] += 1

    policy = ActionPolicy(
        ActionMasker(3, [0, 2]),
        strategy,
        actor,
        container,
        learning_starts,
        queue_for_inference=queue,
        record_random_step=random_step,
    )
    record.update(actor=actor, learner=learner, container=container)
    return policy, record


def env_state(env_id: int = 0) -> EnvironmentState:
    state = EnvironmentState(env_id, np.random.default_rng(env_id))
    state.begin_episode(np.zeros(4, dtype=np.float32), {"score": 0, "lives": 3})
    return state


def test_action_policy_warmup_exploration_and_inference() -> None:
    policy, record = make_policy(LinearEpsilonGreedy(0.0, 0.0, 1), learning_starts=10)
    env, state = FakeEnv(), env_state()
    for step in range(10):  # warm-up: random at once, whatever the strategy says
        policy.select_and_enqueue_action(env, 0, state, step=step)  # type: ignore[arg-type]
    assert len(env.submitted) == 10 and {a for _, a in env.submitted} <= {0, 2}
    assert record["queued"] == [] and not state.last_action_greedy
    policy.select_and_enqueue_action(env, 0, state, step=10)  # type: ignore[arg-type]
    assert record["queued"] == [0] and len(env.submitted) == 10
    policy.on_inference_complete(state, 2)
    assert state.last_action == 2 and state.last_action_greedy
    state.random_control = True  # a trajectory replay hands this env to random actions
    policy.select_and_enqueue_action(env, 0, state, step=11)  # type: ignore[arg-type]
    assert record["random_steps"] == 1 and len(env.submitted) == 11
    assert policy.get_exploration_value(11) == 0.0

    explore, _ = make_policy(LinearEpsilonGreedy(1.0, 1.0, 1), learning_starts=0)
    env = FakeEnv()
    explore.select_and_enqueue_action(env, 0, env_state(), step=5)  # type: ignore[arg-type]
    assert len(env.submitted) == 1


def test_action_policy_weight_sync_and_noise() -> None:
    policy, record = make_policy(NoisyNetExploration(), learning_starts=0, noisy=True)
    actor, learner, container = record["actor"], record["learner"], record["container"]
    assert policy.get_exploration_value(100) is None
    x = torch.ones(1, 4)
    before = actor(x)
    policy.sync_weights_after_inference()  # version 0: nothing newer
    torch.testing.assert_close(actor(x), before)
    with container.update():
        pass
    policy.sync_weights_after_inference()
    assert policy.synced_version == 1
    for name, value in learner.state_dict().items():
        torch.testing.assert_close(actor.state_dict()[name], value)
    noise = actor.advantage[0].weight_epsilon.clone()
    policy.reset_noise_before_inference(step=0, num_environments=4)
    assert not torch.equal(noise, actor.advantage[0].weight_epsilon)
    noise = actor.advantage[0].weight_epsilon.clone()
    policy.reset_noise_before_inference(step=1, num_environments=4)  # same round: kept
    assert torch.equal(noise, actor.advantage[0].weight_epsilon)


# -- reward shaping --------------------------------------------------------------------------------


def test_reward_shaping_pipeline() -> None:
    state = env_state()
    assert ClipReward(-1, 1)(5.0, {}, state) == 1.0
    assert ScaleReward(0.5)(3.0, {}, state) == 1.5
    assert SignReward()(-0.2, {}, state) == -1.0
    assert LifeLossPenalty(2.0)(1.0, {"lives": 2}, state) == -1.0
    assert LifeLossPenalty(2.0)(1.0, {"lives": 3}, state) == 1.0
    config = DQNExperimentConfiguration.from_dict(
        {
            "reward_shaping": [
                {
                    "type": "callable",
                    "target": f"{__name__}:double_reward",
                    "kwargs": {"factor": 3},
                },
                {"type": "life_loss", "penalty": 1.0},
                {"type": "clip", "min": -2, "max": 2},
            ]
        }
    )
    pipeline = RewardShapingPipeline.from_config(config.reward_shaping)
    assert len(pipeline) == 3
    assert pipeline(0.5, {"lives": 3}, state) == 1.5
    assert pipeline(1.0, {"lives": 2}, state) == 2.0
    assert pipeline(-1.0, {"lives": 2}, state) == -2.0
    bad = DQNExperimentConfiguration.from_dict(
        {"reward_shaping": [{"type": "callable", "target": "no_such_module:f"}]}
    )
    with pytest.raises(ValueError, match="cannot import"):
        RewardShapingPipeline.from_config(bad.reward_shaping)


# -- configuration ------------------------------------------------------------------------------------


def test_config_defaults_yaml_round_trip(tmp_path: Path) -> None:
    config = DQNExperimentConfiguration()
    assert config.game == "catch" and config.algo == "dqn"
    path = tmp_path / "c.yaml"
    path.write_text(config.to_yaml())
    assert DQNExperimentConfiguration.from_yaml(path) == config
    from pydantic import BaseModel

    from oakemu_rl.dqn import config as dqn_module
    from oakemu_rl.envs import observation as observation_module
    from oakemu_rl.ppo import config as ppo_module
    from oakemu_rl.runtime import config_base, rollback

    # Every setting of both algorithms says what it does (`oakemu-rl config show`).
    for module in (dqn_module, ppo_module, config_base, rollback, observation_module):
        models = [
            v for v in vars(module).values() if isinstance(v, type) and issubclass(v, BaseModel)
        ]
        for model in models:
            if model.__module__ != module.__name__:
                continue
            for name, field in model.model_fields.items():
                assert field.description, f"{model.__name__}.{name} has no description"


def test_config_errors_name_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("learner:\n  batch_size: 0\n  lerning_rate: 1\n")
    with pytest.raises(ConfigError) as info:
        DQNExperimentConfiguration.from_yaml(path)
    message = str(info.value)
    assert f"{path}: learner.batch_size" in message and "greater than or equal to 1" in message
    assert f"{path}: learner.lerning_rate: unknown setting" in message
    path.write_text("exploration: {type: noisy}\n")
    with pytest.raises(ConfigError, match=r"model\.noisy"):
        DQNExperimentConfiguration.from_yaml(path)
    path.write_text("learner: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        DQNExperimentConfiguration.from_yaml(path)
    with pytest.raises(ConfigError, match="not found"):
        DQNExperimentConfiguration.from_yaml(tmp_path / "missing.yaml")


def _huber(x: float, delta: float) -> float:
    return 0.5 * x * x if abs(x) <= delta else delta * (abs(x) - 0.5 * delta)


@pytest.mark.parametrize("double", [True, False], ids=["double", "dqn"])
def test_td_loss_matches_the_textbook_targets(double: bool) -> None:
    from oakemu_rl.dqn.td_loss import td_loss

    g = torch.Generator().manual_seed(1)
    batch, actions_n = 6, 4
    q = torch.randn(batch, actions_n, generator=g, requires_grad=True)
    actions = torch.randint(0, actions_n, (batch,), generator=g)
    returns = torch.randn(batch, generator=g)
    discounts = torch.tensor([0.97, 0.0, 0.97, 0.97, 0.0, 0.97])  # 0: terminated
    target_q = torch.randn(batch, actions_n, generator=g) * 3
    online_q = torch.randn(batch, actions_n, generator=g)
    weights = torch.rand(batch, generator=g)
    result = td_loss(
        q, actions, returns, discounts, target_q, online_q if double else None, weights,
        huber_delta=1.0,
    )  # fmt: skip
    expected_loss, expected_td = 0.0, []
    for i in range(batch):
        chooser = online_q[i] if double else target_q[i]
        target = float(returns[i]) + float(discounts[i]) * float(target_q[i, int(chooser.argmax())])
        td = float(q[i, actions[i]].detach()) - target
        expected_td.append(td)
        expected_loss += float(weights[i]) * _huber(td, 1.0) / batch
    assert float(result.loss.detach()) == pytest.approx(expected_loss, rel=1e-5)
    assert result.td_errors.tolist() == pytest.approx(expected_td, rel=1e-5)
    assert result.q_taken.tolist() == pytest.approx(q[torch.arange(batch), actions].tolist())
    result.loss.backward()
    assert q.grad is not None
    untaken = torch.ones_like(q, dtype=torch.bool)
    untaken[torch.arange(batch), actions] = False
    assert torch.all(q.grad[untaken] == 0)  # only Q(s, a) is trained


def test_td_loss_never_bootstraps_from_a_masked_action() -> None:
    from oakemu_rl.dqn.td_loss import td_loss

    masker = ActionMasker(3, allowed=[0, 2])
    q = torch.zeros(1, 3)
    target_q = torch.tensor([[1.0, 50.0, 2.0]])
    online_q = torch.tensor([[0.0, 9.0, 1.0]])  # prefers the disallowed action 1
    ones = torch.ones(1)
    result = td_loss(
        q, torch.zeros(1, dtype=torch.long), torch.zeros(1), ones, target_q, online_q, ones,
        huber_delta=1.0, action_mask=masker.additive_mask(q.device),
    )  # fmt: skip
    assert float(result.td_errors[0]) == pytest.approx(-2.0)  # Q(s', 2), not Q(s', 1)
