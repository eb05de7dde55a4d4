"""DQN learning from demonstrations as DQfD does: the demonstration part of replay, its
share of each batch, the large-margin loss, and a run on catch that learns faster with it.

The catch demonstrations are played here by a scripted policy that moves the basket
under the ball, read from the game's variables (catch.yaml: ball_x, paddle_x; the basket
is 6 columns wide), and saved as trajectory files.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from oakemu_rl.dqn.action_masker import ActionMasker
from oakemu_rl.dqn.batch_prefetcher import PreparedBatch
from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.dqn.demo_replay import build_demonstration_buffer, large_margin_loss
from oakemu_rl.dqn.learner import Learner
from oakemu_rl.dqn.replay_buffer import ReplayBuffer, Transition
from oakemu_rl.envs.observation import ObservationConfig
from oakemu_rl.experiments import DQNExperiment
from oakemu_rl.experiments.torch_setup import build_optimizer
from oakemu_rl.games.cells import variable_cells
from oakemu_rl.games.loader import load_game
from oakemu_rl.runtime.context import RuntimeContext
from oakemu_rl.runtime.replay_ratio_gate import ReplayRatioGate
from oakemu_rl.runtime.reward_shaping import NoveltyBonus, RewardShapingPipeline, ScaleReward
from oakemu_rl.runtime.thread_safe_model import ThreadSafeModel
from oakemu_rl.trajectories.demonstrations import DemonstrationSet
from trajectory_testing import catch_policy, record

# -- the large-margin loss --------------------------------------------------------------------


def test_large_margin_loss_is_the_formula_over_the_allowed_actions() -> None:
    q = torch.tensor(
        [
            [1.0, 2.0, 0.5],  # a_E = 0: max(1 + 0, 2 + 0.8) - 1 = 1.8
            [0.3, 0.2, 5.0],  # a_E = 1: action 2 is masked: max(0.3 + 0.8, 0.2) - 0.2 = 0.9
            [3.0, 1.0, 0.1],  # a_E = 0, already ahead by more than the margin: 0
        ],
        requires_grad=True,
    )
    expert = torch.tensor([0, 1, 0])
    mask = torch.tensor([0.0, 0.0, float("-inf")])
    loss = large_margin_loss(q, expert, 0.8, mask)
    assert loss.item() == pytest.approx((1.8 + 0.9 + 0.0) / 3)
    # Unmasked, action 2's Q of 5 counts: row 2 gives 5.8 - 0.2.
    unmasked = large_margin_loss(q.detach(), expert, 0.8)
    assert unmasked.item() == pytest.approx((1.8 + 5.6 + 0.0) / 3)
    loss.backward()  # type: ignore[no-untyped-call]
    assert q.grad is not None
    # Row 0: +1 to the best other action, -1 to the demonstrated one (each over 3 rows).
    expected = torch.tensor([[-1.0, 1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 0.0, 0.0]]) / 3
    assert torch.allclose(q.grad, expected)


# -- the demonstration buffer -----------------------------------------------------------------


def test_the_demonstration_buffer_holds_every_step_with_its_n_step_return(
    write_game: Any, tmp_path: Path
) -> None:
    # The counter game: its score counts frames (reward +2 a step), a 'rare' routine pays
    # 5 every other step, time costs 0.5; a score of 60 wins (terminated).
    game = load_game(write_game())
    observation = ObservationConfig(type="ram", ram=["score"], frame_stack=2)
    directory = tmp_path / "demos"

    def play(values: dict[str, int], rng: np.random.Generator) -> int:
        return int(rng.integers(3))

    full, full_obs = record(game, observation, play, seed=1, path=directory / "a.trajectory.json")
    cut, cut_obs = record(
        game, observation, play, seed=2, path=directory / "b.trajectory.json", max_steps=7
    )
    assert full.outcome == "win" and cut.outcome is None and cut.length == 7
    demos = DemonstrationSet.load([directory], game, observation, stride=5)
    template = ReplayBuffer(10, (2,), frame_stack=2, n_step=3, gamma=0.9, prioritized=True)
    gamma, n = 0.9, 3

    for factor in (1.0, 2.0):
        shaping = RewardShapingPipeline([ScaleReward(factor)])
        buffer = build_demonstration_buffer(demos, template, shaping)
        assert not buffer.prioritized and buffer.n_step == n and buffer.frame_stack == 2
        assert len(buffer) == buffer.capacity == full.length + cut.length
        stored = buffer.transitions()
        row = 0
        for trajectory, seen, terminated in ((full, full_obs, True), (cut, cut_obs, False)):
            rewards = factor * trajectory.rewards.astype(np.float64)
            length = trajectory.length
            for i in range(length):
                k = min(n, length - i)
                expected_return = sum(gamma**j * rewards[i + j] for j in range(k))
                # A win within the n steps ends the return; a recording that stops early
                # bootstraps from its last observation.
                discount = 0.0 if terminated and i + k == length else gamma**k
                assert stored["actions"][row] == trajectory.actions[i]
                assert stored["returns"][row] == pytest.approx(expected_return, rel=1e-6)
                assert stored["discounts"][row] == pytest.approx(discount, rel=1e-6)
                np.testing.assert_array_equal(stored["observations"][row], seen[i])
                np.testing.assert_array_equal(stored["next_observations"][row], seen[i + k])
                row += 1
    demos.close()


# -- batches ----------------------------------------------------------------------------------

SHAPE = (2, 16, 16)


def fill(buffer: ReplayBuffer, seed: int, action: int | None = None, low: int = 0) -> None:
    """Four episodes of random frames (pixels from `low` up), random actions or `action`."""
    rng = np.random.default_rng(seed)
    for env in range(4):
        obs = rng.integers(low, 256, SHAPE, dtype=np.uint8)
        for i in range(60):
            frame = rng.integers(low, 256, (1, *SHAPE[1:]), dtype=np.uint8)
            next_obs = np.concatenate([obs[1:], frame])
            a = int(rng.integers(3)) if action is None else action
            buffer.add(Transition(env, obs, a, float(rng.normal()), next_obs, i == 59, False))
            obs = next_obs


def make_learner(
    tmp_path: Path,
    *,
    prefetch: bool = False,
    demo_fraction: float = 0.3,
    demonstrations: bool = True,
    allowed: list[int] | None = None,
) -> tuple[Learner, ReplayBuffer, ReplayBuffer]:
    """A learner on a prioritized agent buffer of random frames and a demonstration buffer
    whose frames are all brighter than 200 and whose actions are all 2."""
    config = DQNExperimentConfiguration.from_dict(
        {
            "model": {"torso": "small_cnn", "head_hidden": 32},
            "replay": {"prioritized": True},
            "learner": {"prefetch": prefetch, "batch_size": 16, "double_dqn": True},
            "dqfd": {"demo_fraction": demo_fraction},
        }
    )
    context: RuntimeContext[DQNExperimentConfiguration] = RuntimeContext(
        config=config, device=torch.device("cpu"), run_dir=tmp_path, seed=3, torch_threads=1
    )
    torch.manual_seed(0)
    model = DQNExperiment.build_model(config, SHAPE, 3)
    target = DQNExperiment.build_model(config, SHAPE, 3)
    agent = ReplayBuffer(1_000, SHAPE, frame_stack=2, n_step=3, gamma=0.9, prioritized=True)
    fill(agent, seed=5)
    demo = ReplayBuffer(240, SHAPE, frame_stack=2, n_step=3, gamma=0.9)
    fill(demo, seed=6, action=2, low=201)
    learner = Learner(
        context,
        ThreadSafeModel(model),
        target,
        build_optimizer(model, 1e-3, 1e-4),
        lambda: agent,
        ReplayRatioGate(1.0, 0, 64),
        ActionMasker(3, allowed),
        lambda: 100,
        demonstrations=demo if demonstrations else None,
    )
    return learner, agent, demo


def peek(learner: Learner) -> PreparedBatch:
    """The batch the learner's next update will train on."""
    state = learner.rng.bit_generator.state
    batch = learner.prefetcher.prepare(beta=learner.beta(100))
    learner.rng.bit_generator.state = state
    return batch


def test_a_batch_has_the_configured_share_of_demonstration_rows(tmp_path: Path) -> None:
    learner, agent, _ = make_learner(tmp_path, demo_fraction=0.3)
    agent.update_priorities(np.arange(len(agent)), np.random.default_rng(0).random(len(agent)))
    batch = peek(learner)
    assert batch.demo_rows == round(16 * 0.3) == 5 and batch.agent_rows == 11
    demo = batch.is_demonstration
    assert demo.tolist() == [False] * 11 + [True] * 5
    frames = batch.batch.observations.reshape(16, -1)
    assert (frames[demo] > 200).all() and (frames[~demo] <= 200).any(axis=1).all()
    assert (batch.batch.actions[demo] == 2).all()
    assert (batch.batch.weights[demo] == 1.0).all()  # demonstration rows: weight 1
    assert batch.batch.weights[~demo].max() == 1.0 and batch.batch.weights[~demo].min() < 1.0

    # An update of this batch: the large-margin loss on the demonstration rows, new
    # priorities for the agent's rows only (their indices are the agent buffer's).
    before = agent.priorities().copy()
    metrics = learner.update()
    assert metrics["margin"] > 0 and np.isfinite(metrics["loss"])
    changed = set(np.flatnonzero(agent.priorities() != before).tolist())
    assert changed and changed <= set(batch.batch.indices[~demo].tolist())


def test_all_demonstration_batches_and_unchanged_batches_without_demonstrations(
    tmp_path: Path,
) -> None:
    # All-demonstration batches are possible; with no demonstration buffer the batch is
    # exactly the agent buffer's sample, as before DQfD.
    learner, _, _ = make_learner(tmp_path, demo_fraction=1.0)
    batch = learner.prefetcher.prepare(beta=0.4)
    assert batch.demo_rows == 16 and batch.is_demonstration.all()
    assert "margin" in learner.update()

    plain, agent, _ = make_learner(tmp_path, demonstrations=False)
    rng = np.random.default_rng()
    rng.bit_generator.state = plain.rng.bit_generator.state
    expected = agent.sample(16, rng, beta=0.4)
    batch = plain.prefetcher.prepare(beta=0.4)
    assert batch.demo_rows == 0 and not batch.is_demonstration.any()
    np.testing.assert_array_equal(batch.batch.indices, expected.indices)
    np.testing.assert_array_equal(batch.batch.weights, expected.weights)
    assert "margin" not in plain.update()


def test_the_margin_loss_uses_the_learners_action_mask(tmp_path: Path) -> None:
    # Only actions 0 and 2 are allowed: the margin is taken over those two.
    learner, _, _ = make_learner(tmp_path, demo_fraction=1.0, allowed=[0, 2])
    batch = peek(learner)
    with torch.no_grad():
        q = learner.model(batch.observations).float()
    expected = torch.maximum(q[:, 0] + 0.8, q[:, 2]) - q[:, 2]  # every a_E is 2
    assert learner.update()["margin"] == pytest.approx(float(expected.mean()), rel=1e-5)


def run_updates(learner: Learner, updates: int, hold_at: int) -> dict[str, Any]:
    """Run `updates` updates on a thread of their own, like the learner thread, taking
    the learner's state under `hold()` after `hold_at` of them."""
    out: dict[str, Any] = {}

    def body() -> None:
        learner.context.enter_thread()
        if learner.config.prefetch:
            learner.prefetcher.start()
        try:
            for n in range(updates):
                if n == hold_at:
                    with learner.hold():
                        out["held_rng"] = learner.state_dict()["rng"]
                learner.update()
        finally:
            learner.prefetcher.close()

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(120)
    out["weights"] = {k: v.clone() for k, v in learner.model.state_dict().items()}
    out["rng"] = learner.rng.bit_generator.state
    return out


def test_prefetching_with_demonstrations_matches_the_inline_learner(tmp_path: Path) -> None:
    inline = run_updates(make_learner(tmp_path, prefetch=False)[0], 10, hold_at=6)
    prefetching, _, _ = make_learner(tmp_path, prefetch=True)
    prefetched = run_updates(prefetching, 10, hold_at=6)
    assert prefetching.prefetcher.pending is False
    for name, tensor in inline["weights"].items():
        assert torch.equal(tensor, prefetched["weights"][name]), name
    # hold() gives back the batch drawn ahead, agent and demonstration rows alike.
    assert inline["held_rng"] == prefetched["held_rng"]
    assert inline["rng"] == prefetched["rng"]


# -- learning -----------------------------------------------------------------------------------


def catch_run(seed: int, demos: list[str]) -> DQNExperimentConfiguration:
    """A short DQN run on catch seeing the play area's colour attributes (the ball and the
    basket as bright cells), in this process; half of each batch from the demonstrations."""
    return DQNExperimentConfiguration.from_dict(
        {
            "game": "catch",
            "total_steps": 1_000,
            "seed": seed,
            "torch_threads": 1,
            "env": {
                "num_envs": 4,
                "backend": "inline",
                # The raw bytes the bar below was measured on (with the colour channels,
                # plain DQN learns catch much sooner, and the gap narrows).
                "observation": {
                    "type": "attributes",
                    "attribute_encoding": "byte",
                    "frame_stack": 1,
                },
            },
            "model": {"torso": "small_cnn", "head_hidden": 64},
            "learner": {
                "learning_starts": 200,
                "batch_size": 32,
                "replay_ratio": 2.0,
                "learning_rate": 1e-3,
            },
            "exploration": {"decay_steps": 500},
            "dqfd": {"demo_fraction": 0.5},
            "tester": {
                "every_steps": 10**6,
                "episodes": 4,
                "final_episodes": 4,
                "num_envs": 4,
                "random_baseline": False,
            },
            "checkpoint": {"every_steps": 10**6},
            "logging": {"console": False, "tensorboard": False},
            # DQfD alone: no training episodes start along the demonstrations.
            "demos": {"paths": demos, "backplay": False},
        }
    )


def test_a_resumed_run_rebuilds_the_demonstration_part_and_learn_false_has_none(
    tmp_path: Path,
) -> None:
    game = load_game("catch")
    observation = ObservationConfig(type="attributes", attribute_encoding="byte", frame_stack=1)
    demo, _ = record(
        game, observation, catch_policy, seed=0, path=tmp_path / "demos" / "0.trajectory.json",
        max_steps=60,
    )  # fmt: skip
    data = catch_run(0, [str(tmp_path / "demos")]).model_dump()
    data["total_steps"] = 300
    data["learner"]["learning_starts"] = 100
    data["checkpoint"]["every_steps"] = 300
    data["tester"]["enabled"] = False
    config = DQNExperimentConfiguration.from_dict(data)

    def quiet(config: DQNExperimentConfiguration, run_dir: Path) -> DQNExperiment:
        return DQNExperiment(config, run_dir, console=False, print_fn=lambda _: None)

    first = quiet(config, tmp_path / "run")
    first.run()
    assert first.learner.updates > 0 and first.learner.prefetcher.demo_rows == 16
    assert first.demonstration_buffer is not None
    contents = first.demonstration_buffer.transitions()
    assert len(contents["actions"]) == demo.length
    # Checkpoints leave the demonstrations out: a resumed run replays them from the file.
    resumed = DQNExperiment.from_run_dir(
        tmp_path / "run", total_steps=400, console=False, print_fn=lambda _: None
    )
    resumed.build()
    try:
        assert resumed.trainer.steps == 300
        assert resumed.demonstration_buffer is not None
        for name, array in resumed.demonstration_buffer.transitions().items():
            np.testing.assert_array_equal(array, contents[name], err_msg=name)
    finally:
        resumed.close()

    data["demos"]["learn"] = False
    no_learning = quiet(DQNExperimentConfiguration.from_dict(data), tmp_path / "no-learning")
    no_learning.build()
    try:
        assert no_learning.demonstration_buffer is None
        assert no_learning.learner.prefetcher.demo_rows == 0
    finally:
        no_learning.close()


@pytest.mark.slow
def test_dqfd_learns_catch_faster_than_dqn_with_the_same_budget(tmp_path: Path) -> None:
    game = load_game("catch")
    observation = ObservationConfig(type="attributes", attribute_encoding="byte", frame_stack=1)
    total_steps = 0
    for i in range(2):
        demo, _ = record(
            game,
            observation,
            catch_policy,
            seed=i,
            path=tmp_path / "demos" / f"{i}.trajectory.json",
        )
        assert demo.won and demo.episode_return == 30  # 30 blocks caught, none missed
        total_steps += demo.length
    returns = {}
    for name, demos in (("dqn", []), ("dqfd", [str(tmp_path / "demos")])):
        experiment = DQNExperiment(
            catch_run(0, demos), tmp_path / name, console=False, print_fn=lambda _: None
        )
        summary = experiment.run()
        returns[name] = summary["final_eval"]["mean_return"]
        margin_logged = "train/margin_loss" in experiment.memory.history
        if name == "dqfd":
            buffer = experiment.demonstration_buffer
            assert buffer is not None and len(buffer) == total_steps  # every demonstration step
            assert margin_logged
        else:
            assert experiment.demonstration_buffer is None and not margin_logged
    # Mean greedy returns measured on seeds 0, 1 and 2, three runs each (a perfect game
    # returns 30, a random one about -4): DQN -4.5..0, DQfD 14.75..28.5; at least 17.75
    # apart on every seed. The actor and learner threads interleave by timing, so a
    # seed's returns vary from run to run.
    assert returns["dqfd"] >= returns["dqn"] + 10, returns


def test_demonstrations_pass_through_a_novelty_bonus_on_variable_cells(tmp_path: Path) -> None:
    # A novelty shaper needs each step's next observation (and, on variable cells, its
    # values): the demonstrations' steps give both, and their visits are counted.
    game = load_game("catch")
    observation = ObservationConfig(type="ram", ram=["paddle_x", "ball_x"], frame_stack=1)
    recorded, _ = record(
        game, observation, catch_policy, seed=3, path=tmp_path / "d" / "a.trajectory.json",
        max_steps=40,
    )  # fmt: skip
    demos = DemonstrationSet.load([tmp_path / "d"], game, observation)
    novelty = NoveltyBonus(coef=0.1, variables=variable_cells(game))
    template = ReplayBuffer(10, (2,), frame_stack=1, n_step=1, gamma=0.9)
    buffer = build_demonstration_buffer(demos, template, RewardShapingPipeline([novelty]))
    assert len(buffer) == recorded.length == 40
    assert sum(novelty.counts.values()) == 40 and 1 < len(novelty.counts) <= 32
