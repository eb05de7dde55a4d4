"""algo: distill: the soft cross-entropy, the aggregated dataset (bound, weighting,
checkpoint), a real run on catch that resumes with its dataset, evaluate and export on it,
`--init-from` into PPO and DQN, and learning catch from the search teacher."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
import torch
import yaml

from distill_testing import QUIET, no_print
from oakemu_rl.cli.main import main
from oakemu_rl.distill import (
    DATASET_FILE,
    BetaSchedule,
    DistillDataset,
    DistillExperimentConfiguration,
    safe_choice_rate,
    safe_set_nll,
    soft_cross_entropy,
)
from oakemu_rl.distill.ensemble import StudentEnsemble
from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.experiments.distill_experiment import DistillExperiment
from oakemu_rl.experiments.dqn_experiment import DQNExperiment
from oakemu_rl.experiments.evaluation import find_checkpoint
from oakemu_rl.experiments.experiment import INIT_FROM_FILE, INIT_STUDENT_DIR
from oakemu_rl.experiments.ppo_experiment import PPOExperiment
from oakemu_rl.ppo.config import PPOExperimentConfiguration
from oakemu_rl.runtime.checkpoints import CheckpointFile
from oakemu_rl.runtime.config_base import ConfigError, InitAnchorSettings
from oakemu_rl.runtime.shrink_perturb import ShrinkPerturbSettings, shrink_and_perturb
from oakemu_rl.runtime.state_adapter import MODEL_FILE
from oakemu_rl.runtime.student_anchor import StudentAnchor

RAM = {"type": "ram", "ram": ["ball_x", "ball_y", "paddle_x"], "frame_stack": 1}


# -- the pieces ---------------------------------------------------------------------------


def test_soft_cross_entropy_matches_a_hand_computation() -> None:
    logits = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])
    targets = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]])
    expected = []
    for row, target in zip(logits.tolist(), targets.tolist(), strict=True):
        norm = math.log(sum(math.exp(x) for x in row))
        expected.append(-sum(t * (x - norm) for x, t in zip(row, target, strict=True)))
    loss = soft_cross_entropy(logits, targets)
    assert float(loss) == pytest.approx(sum(expected) / 2, rel=1e-6)
    weighted = soft_cross_entropy(logits, targets, torch.tensor([3.0, 1.0]))
    assert float(weighted) == pytest.approx((3 * expected[0] + expected[1]) / 4, rel=1e-6)
    # Its minimum is the target's entropy, where the policy equals the target.
    target = torch.tensor([[0.2, 0.3, 0.5]])
    entropy = -float((target * target.log()).sum())
    assert float(soft_cross_entropy(target.log(), target)) == pytest.approx(entropy, rel=1e-6)
    # An action with no target mass adds nothing, even at a masked (-inf) logit.
    masked = torch.tensor([[0.0, 0.0, float("-inf")]])
    assert float(soft_cross_entropy(masked, torch.tensor([[0.5, 0.5, 0.0]]))) == pytest.approx(
        math.log(2), rel=1e-6
    )


def test_the_safe_set_loss_asks_only_for_mass_on_the_allowed_actions() -> None:
    logits = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])
    targets = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    expected = []
    for row, target in zip(logits.tolist(), targets.tolist(), strict=True):
        probs = [math.exp(x) / sum(math.exp(y) for y in row) for x in row]
        expected.append(-math.log(sum(p for p, t in zip(probs, target, strict=True) if t > 0)))
    assert float(safe_set_nll(logits, targets)) == pytest.approx(sum(expected) / 2, rel=1e-6)
    weighted = safe_set_nll(logits, targets, torch.tensor([3.0, 1.0]))
    assert float(weighted) == pytest.approx((3 * expected[0] + expected[1]) / 4, rel=1e-6)
    # All the mass on one allowed action is as good as the target's split; cross-entropy
    # asks for the split.
    one = torch.tensor([[0.0, 30.0, 0.0]])
    split = torch.tensor([[0.0, 0.5, 0.5]])
    assert float(safe_set_nll(one, split)) == pytest.approx(0.0, abs=1e-6)
    assert float(soft_cross_entropy(one, split)) > 10
    # A row where every action is allowed (no life at stake) teaches nothing.
    assert float(safe_set_nll(logits[:1], torch.full((1, 3), 1 / 3))) == pytest.approx(0, abs=1e-6)
    with pytest.raises(ConfigError, match="search: beam's weights among them would do nothing"):
        DistillExperimentConfiguration.from_dict({"distill": {"loss": "safe_set"}})
    safe_set = DistillExperimentConfiguration.from_dict(
        {"distill": {"search": "safety", "loss": "safe_set"}}
    )
    assert safe_set.distill.loss == "safe_set"


def test_the_safe_choice_rate_counts_only_states_where_a_life_is_at_stake() -> None:
    targets = np.array(
        [
            [0.0, 0.6, 0.4],  # action 0 loses a life: critical
            [0.5, 0.5, 0.0],  # action 2 loses a life: critical
            [0.2, 0.3, 0.5],  # every action safe: not critical
            [1 / 3, 1 / 3, 1 / 3],  # every action equally bad (all lose a life): not critical
        ],
        dtype=np.float32,
    )
    assert safe_choice_rate(targets, np.array([1, 2, 0, 0])) == 0.5
    assert safe_choice_rate(targets, np.array([2, 0, 1, 2])) == 1.0
    assert safe_choice_rate(targets, np.array([0, 2, 1, 1])) == 0.0
    assert safe_choice_rate(targets[2:], np.array([0, 1])) is None


def test_beta_decays_linearly_then_stays() -> None:
    schedule = BetaSchedule(1.0, 0.1, 100)
    assert schedule(0) == 1.0
    assert schedule(50) == pytest.approx(0.55)
    assert schedule(100) == pytest.approx(0.1) and schedule(10**6) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="beta start"):
        BetaSchedule(1.5, 0.0, 10)


def test_beta_without_decay_steps_decays_over_the_runs_budget() -> None:
    spent = {"share": 0.0}
    schedule = BetaSchedule(1.0, 0.2, None, budget_used=lambda step: spent["share"])
    assert schedule(10**6) == 1.0  # the budget, not the step count, decides
    spent["share"] = 0.5
    assert schedule(0) == pytest.approx(0.6)
    spent["share"] = 1.0
    assert schedule(0) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="give budget_used"):
        BetaSchedule(1.0, 0.0, None)


def _filled(count: int, capacity: int = 10, weight: float = 4.0) -> DistillDataset:
    entry = 3 + 3 * 4 + 2  # a (3,) uint8 observation, 3 float32 target entries, 2 flags
    dataset = DistillDataset(
        entry * capacity + entry - 1, (3,), np.uint8, 3, critical_weight=weight
    )
    for i in range(count):
        target = np.eye(3, dtype=np.float32)[i % 3]
        dataset.add(np.full(3, i, dtype=np.uint8), target, holdout=i % 5 == 4)
    return dataset


def test_the_dataset_stays_within_its_bytes_evicting_the_oldest() -> None:
    dataset = _filled(25)
    assert dataset.capacity == 10 and len(dataset) == 10 and dataset.added == 25
    assert dataset.nbytes <= dataset.max_bytes
    assert sorted(dataset.state_dict()["observations"][:, 0].tolist()) == list(range(15, 25))
    assert dataset.holdouts == 2 and dataset.trainable == 8  # ids 19 and 24
    # Evicted ids are ignored; held-out ones are marked but never counted or drawn.
    assert dataset.mark_critical([3, 14, 15, 16, 19]) == 3
    assert dataset.criticals == 2
    with pytest.raises(ValueError, match="holds no state of 17 bytes"):
        DistillDataset(16, (3,), np.uint8, 3)


def test_a_binary_dataset_holds_eight_times_the_states_and_gives_them_back_exactly(
    tmp_path: Path,
) -> None:
    shape, rng = (18, 8, 10), np.random.default_rng(3)  # 1,440 values: 180 bytes packed
    observations = rng.integers(0, 2, size=(200, *shape), dtype=np.uint8) * np.uint8(255)
    targets = rng.dirichlet(np.ones(3), size=200).astype(np.float32)
    budget = 20 * (1440 + 3 * 4 + 2)  # 20 unpacked states
    plain = DistillDataset(budget, shape, np.uint8, 3)
    packed = DistillDataset(budget, shape, np.uint8, 3, binary=True)
    assert (plain.capacity, packed.capacity) == (20, 149)  # 29,080 // (180 + 12 + 2)
    for observation, target in zip(observations, targets, strict=True):
        plain.add(observation, target)
        packed.add(observation, target)
    assert packed.nbytes <= packed.max_bytes and len(packed) == packed.capacity
    saved = packed.state_dict()
    assert "observations" not in saved and saved["observation_bits"].shape == (149, 180)
    batch = packed.sample(64, np.random.default_rng(1))
    assert batch is not None and batch.observations.shape == (64, *shape)
    # Every drawn observation is one that was added, bit for bit, with its own target.
    index = {observation.tobytes(): i for i, observation in enumerate(observations)}
    for observation, target in zip(batch.observations, batch.targets, strict=True):
        np.testing.assert_array_equal(target, targets[index[observation.tobytes()]])
    # A packed save loads into an unpacked dataset and the other way round.
    file = CheckpointFile.from_numpy(DATASET_FILE, saved)
    (tmp_path / DATASET_FILE).write_bytes(file.data)
    with np.load(tmp_path / DATASET_FILE, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    unpacked = DistillDataset(budget * 8, shape, np.uint8, 3)
    unpacked.load_state_dict(arrays)
    kept = len(packed)
    np.testing.assert_array_equal(unpacked.state_dict()["observations"], observations[-kept:])
    repacked = DistillDataset(budget, shape, np.uint8, 3, binary=True)
    repacked.load_state_dict(plain.state_dict())
    np.testing.assert_array_equal(
        np.unpackbits(repacked.state_dict()["observation_bits"], axis=1, count=1440),
        (observations[-20:] != 0).reshape(20, 1440),
    )
    # A value other than 0 or 255 is refused, naming it; nothing is stored.
    with pytest.raises(ValueError, match=r"0s and 255s; got values \[17\]"):
        packed.add(np.full(shape, 17, dtype=np.uint8), targets[0])
    assert packed.added == 200
    with pytest.raises(ValueError, match="uint8 observations, not float32"):
        DistillDataset(budget, shape, np.float32, 3, binary=True)


def test_critical_states_are_drawn_by_their_weight_and_holdouts_never() -> None:
    dataset = _filled(10)  # ids 0-9; 4 and 9 held out
    dataset.mark_critical([0, 1])
    batch = dataset.sample(40_000, np.random.default_rng(0))
    assert batch is not None
    drawn = batch.observations[:, 0]
    assert not np.isin(drawn, [4, 9]).any()
    # 2 critical states of weight 4 and 6 others of weight 1: 8/14 of the draws.
    assert batch.critical.mean() == pytest.approx(8 / 14, abs=0.01)
    counts = np.bincount(drawn, minlength=10)
    assert counts[0] / counts[2] == pytest.approx(4.0, rel=0.1)
    held = dataset.holdout(10, np.random.default_rng(0))
    assert held is not None and sorted(held[0][:, 0].tolist()) == [4, 9]


def test_a_decisions_only_dataset_draws_only_states_where_some_action_is_ruled_out() -> None:
    """What the safe-set loss learns from: a state whose target allows every action adds
    nothing to it, so its dataset draws only the others, critical ones still weighted,
    counting them through eviction and a checkpoint round trip."""
    dataset = DistillDataset(10 * 17, (3,), np.uint8, 3, critical_weight=4, decisions_only=True)
    allowed_all = np.full(3, 1 / 3, dtype=np.float32)
    assert dataset.sample(8, np.random.default_rng(0)) is None
    dataset.add(np.zeros(3, dtype=np.uint8), allowed_all)
    assert dataset.decisions == 0 and dataset.sample(8, np.random.default_rng(0)) is None
    for i in range(1, 13):  # ids 0-12; 10 kept (3-12); a decision every other id
        target = np.array([0.5, 0.5, 0.0], dtype=np.float32) if i % 2 else allowed_all
        dataset.add(np.full(3, i, dtype=np.uint8), target, holdout=i == 11)
    assert dataset.decisions == 4  # 3, 5, 7, 9 (1 was evicted, 11 is held out)
    dataset.mark_critical([3])
    batch = dataset.sample(20_000, np.random.default_rng(1))
    assert batch is not None
    counts = np.bincount(batch.observations[:, 0], minlength=13)
    assert set(np.flatnonzero(counts).tolist()) == {3, 5, 7, 9}
    assert counts[3] / counts[5] == pytest.approx(4.0, rel=0.1)
    restored = DistillDataset(10 * 17, (3,), np.uint8, 3, decisions_only=True)
    restored.load_state_dict(dataset.state_dict())
    assert restored.decisions == 4


def test_the_dataset_survives_a_checkpoint_file_round_trip(tmp_path: Path) -> None:
    dataset = _filled(23)
    dataset.mark_critical([20, 21])
    file = CheckpointFile.from_numpy(DATASET_FILE, dataset.state_dict())
    (tmp_path / DATASET_FILE).write_bytes(file.data)
    with np.load(tmp_path / DATASET_FILE, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    restored = _filled(0)
    restored.load_state_dict(arrays)
    for key, value in dataset.state_dict().items():
        np.testing.assert_array_equal(restored.state_dict()[key], value)
    assert (restored.added, restored.criticals, restored.holdouts) == (23, 2, 2)
    one, two = (d.sample(64, np.random.default_rng(5)) for d in (dataset, restored))
    assert one is not None and two is not None
    np.testing.assert_array_equal(one.observations, two.observations)
    # A smaller dataset keeps the newest states.
    small = _filled(0, capacity=4)
    small.load_state_dict(arrays)
    assert sorted(small.state_dict()["observations"][:, 0].tolist()) == [19, 20, 21, 22]


def test_the_configuration_refuses_what_distill_cannot_do() -> None:
    with pytest.raises(ConfigError, match="gym:CartPole-v1 is a Gymnasium env"):
        DistillExperimentConfiguration.from_dict({"game": "gym:CartPole-v1"})
    with pytest.raises(ConfigError, match=r"env\.allowed_actions"):
        DistillExperimentConfiguration.from_dict({"env": {"allowed_actions": [0, 1]}})
    with pytest.raises(ConfigError, match=r"distill\.beta_start"):
        DistillExperimentConfiguration.from_dict({"distill": {"beta_start": 1.5}})
    with pytest.raises(ConfigError, match=r"distill\.critical_weight"):
        DistillExperimentConfiguration.from_dict({"distill": {"critical_weight": 0.5}})
    with pytest.raises(ConfigError, match="episodic_life: distill has no bootstrapped"):
        DistillExperimentConfiguration.from_dict({"episodic_life": True})
    with pytest.raises(ConfigError, match=r"distill\.width is a setting of the beam search"):
        DistillExperimentConfiguration.from_dict({"distill": {"search": "safety", "width": 4}})
    with pytest.raises(ConfigError, match="search: margin does not use it"):
        DistillExperimentConfiguration.from_dict(
            {"distill": {"search": "margin", "temperature": 0.5}}
        )
    with pytest.raises(ConfigError, match="search: safety does not use it"):
        DistillExperimentConfiguration.from_dict(
            {"distill": {"search": "safety", "temperature_scale": "spread"}}
        )
    with pytest.raises(ConfigError, match=r"distill\.temperature_scale"):
        DistillExperimentConfiguration.from_dict({"distill": {"temperature_scale": "rank"}})
    spread = DistillExperimentConfiguration.from_dict(
        {"distill": {"temperature_scale": "spread", "temperature": 0.25}}
    ).distill.teacher_settings()
    assert (spread.temperature_scale, spread.temperature) == ("spread", 0.25)
    with pytest.raises(ConfigError, match=r"distill\.prune"):
        DistillExperimentConfiguration.from_dict({"distill": {"prune": "screen"}})
    situation = DistillExperimentConfiguration.from_dict(
        {"distill": {"search": "safety", "prune": "situation"}}
    ).distill.teacher_settings()
    assert situation.prune == "situation"
    # A saved safety configuration (every field written out) loads back.
    safety = DistillExperimentConfiguration.from_dict({"distill": {"search": "safety"}})
    again = DistillExperimentConfiguration.from_dict(yaml.safe_load(safety.to_yaml()))
    assert again.distill.teacher_settings().search == "safety"


def test_config_show_lists_every_distill_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "--algo", "distill"]) == 0
    out = capsys.readouterr().out
    assert "algo: distill" in out and "# Preset: distill/catch" in out
    for name in DistillExperimentConfiguration.model_fields["distill"].annotation.model_fields:  # type: ignore[union-attr]
        assert re.search(rf"\n  {name}:[ \n]", out), name  # a value, or a nested section
    assert main(["train", "--algo", "distill", "--game", "gym:CartPole-v1"]) == 2
    assert "is a Gymnasium env" in capsys.readouterr().err


def test_hidden_variables_must_be_the_games(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "hidden.yaml"
    config.write_text("algo: distill\ngame: catch\ndistill: {hidden: {frames: [0, 3]}}\n")
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config), "--run-dir", str(run_dir), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "distill.hidden: 'frames' is not a data variable of" in error and "catch.yaml" in error
    assert not run_dir.exists()
    config.write_text("algo: distill\ngame: catch\ndistill: {hidden: {ball_x: [30, 0]}}\n")
    assert main(["train", "--config", str(config), "--run-dir", str(run_dir), "--quiet"]) == 2
    assert "distill.hidden: 'ball_x': range [30, 0] is empty" in capsys.readouterr().err
    assert not run_dir.exists()
    config.write_text(
        "algo: distill\ngame: forest_run\ndistill: {hidden: {steer_timer: [scroll_period, 1]}}\n"
    )
    assert main(["train", "--config", str(config), "--run-dir", str(run_dir), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "'steer_timer': range [scroll_period, 1] reads as [4, 1] at the start" in error
    assert not run_dir.exists()


# -- a real run ---------------------------------------------------------------------------


def _cheap_config(**overrides: Any) -> DistillExperimentConfiguration:
    """catch from RAM with a short, narrow teacher (a label costs about 20 emulator steps)."""
    data: dict[str, Any] = {
        "game": "catch",
        "seed": 3,
        "total_steps": 40,
        "torch_threads": 1,
        "env": {"num_envs": 2, "backend": "inline", "observation": RAM},
        "model": {"input_scale": 0.03125},
        "distill": {
            "horizon": 2,
            "width": 2,
            "learning_starts": 8,
            "batch_size": 8,
            "updates_per_step": 1.0,
            "beta_decay_steps": 40,
            "holdout_fraction": 0.2,
            "critical_steps": 4,
            "eval_every_updates": 5,
        },
        "tester": {"enabled": False, "max_episode_steps": 200},
        "checkpoint": {"every_steps": 20},
        "logging": QUIET,
    }
    for key, value in overrides.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return DistillExperimentConfiguration.from_dict(data)


@pytest.fixture(scope="module")
def distill_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A distill run of 40 steps on catch, resumed to 60."""
    run_dir = tmp_path_factory.mktemp("distill") / "run"
    summary = DistillExperiment(_cheap_config(), run_dir, print_fn=no_print).run()
    assert summary["steps"] == 40 and summary["labels"] == 40 + 2  # two resets at the end
    return run_dir


def test_a_distill_run_resumes_with_its_dataset(distill_run: Path) -> None:
    saved = find_checkpoint(distill_run).load_numpy(DATASET_FILE)
    assert len(saved["observations"]) == int(saved["added"]) > 40
    assert saved["observations"].dtype == np.uint8 and saved["targets"].shape[1] == 3
    resumed = DistillExperiment.from_run_dir(distill_run, total_steps=60, print_fn=no_print)
    resumed.build()
    for key, value in resumed.dataset.state_dict().items():
        np.testing.assert_array_equal(value, saved[key])
    assert resumed.actor.labels == int(saved["added"]) and resumed.learner.updates > 0
    # The held-out scores are the student's greedy actions on the held-out states.
    observations = saved["observations"][saved["held_out"]]
    targets = saved["targets"][saved["held_out"]]
    with torch.no_grad():
        actions = resumed.learner.model.greedy_actions(torch.from_numpy(observations)).numpy()
    scores = resumed.learner.holdout_scores()
    best = targets[np.arange(len(actions)), actions] >= targets.max(axis=1) - 1e-6
    assert scores["distill/holdout_accuracy"] == pytest.approx(best.mean())
    assert scores.get("distill/holdout_safe") == safe_choice_rate(targets, actions)
    summary = resumed.run()
    assert summary["steps"] == 60 and summary["resumed_from_step"] == 40
    assert summary["dataset_size"] == summary["labels"] > int(saved["added"])
    assert summary["init_from"] is None


def test_an_attribute_planes_run_keeps_its_dataset_bit_packed(tmp_path: Path) -> None:
    """attributes as planes (every value 0 or 255): the run's dataset stores a bit a value,
    its checkpoint saves them packed, and a resume gives back the very observations."""
    config = _cheap_config(
        total_steps=20,
        env={"observation": {"type": "attributes", "frame_stack": 2}},
        model={"input_scale": 1 / 255},
    )
    experiment = DistillExperiment(config, tmp_path / "run", print_fn=no_print)
    experiment.run()
    dataset = experiment.dataset
    values = math.prod(dataset.observation_shape)
    assert dataset.binary and dataset.entry_bytes == (values + 7) // 8 + 3 * 4 + 2
    saved = find_checkpoint(tmp_path / "run").load_numpy(DATASET_FILE)
    assert "observations" not in saved and len(saved["observation_bits"]) == dataset.added
    resumed = DistillExperiment.from_run_dir(tmp_path / "run", total_steps=40, print_fn=no_print)
    try:
        resumed.build()
        held = resumed.dataset.holdout(100, np.random.default_rng(0))
        original = dataset.holdout(100, np.random.default_rng(0))
        assert held is not None and original is not None
        np.testing.assert_array_equal(held[0], original[0])
        assert set(np.unique(held[0]).tolist()) == {0, 255}
    finally:
        resumed.close()


def test_a_distill_run_resets_its_student_on_schedule(tmp_path: Path) -> None:
    """`distill.shrink_perturb` with shrink 0: every 5th update leaves the student at a fresh
    initialisation (seeded by the run's seed and the update count), logged as a count."""
    config = _cheap_config(
        total_steps=60,
        distill={"shrink_perturb": {"every_updates": 5, "shrink": 0.0}},
        checkpoint={"every_steps": 10**6},
    )
    experiment = DistillExperiment(config, tmp_path / "run", print_fn=no_print)
    experiment.run()
    learner = experiment.learner
    # About 52 updates are due; the learner may trail by up to max_lag_updates (16).
    assert learner.updates >= 30
    logged = dict(experiment.memory.history["train/shrink_perturbs"])
    assert max(logged.values()) == learner.updates // 5 >= 6
    # The next update that completes a period resets the student: whatever it learned,
    # its weights are then the fresh initialisation drawn for that update.
    learner.updates = 9
    fresh = copy.deepcopy(learner.model)
    shrink_and_perturb(fresh, 0.0, seed=ShrinkPerturbSettings.seed(3, 10))
    assert learner.update() is not None and learner.updates == 10
    for name, tensor in learner.model.state_dict().items():
        torch.testing.assert_close(tensor, fresh.state_dict()[name], rtol=0, atol=0)
    with pytest.raises(ConfigError, match=r"set shrink_perturb\.every_updates too"):
        DistillExperimentConfiguration.from_dict({"distill": {"shrink_perturb": {"shrink": 0.0}}})


def test_a_safe_set_run_trains_its_student_by_the_safe_set_loss(tmp_path: Path) -> None:
    """... on the states where some move loses a life; until the first of them (catch's
    first ball lands after about 30 steps) no update falls due and the actor runs on."""
    config = _cheap_config(
        total_steps=90,
        distill={"search": "safety", "loss": "safe_set", "width": 8},
        checkpoint={"every_steps": 10**6},
    )
    experiment = DistillExperiment(config, tmp_path / "run", print_fn=no_print)
    experiment.run()
    learner = experiment.learner
    assert learner.dataset.decisions_only and learner.dataset.decisions > 0
    assert learner.updates > 0 and experiment.actor.labels >= 90
    # Catch's decision states may all leave one safe move, where the two losses coincide:
    # states with two safe moves (and one allowing all three, never drawn) make them differ.
    seen = learner.dataset.sample(1, np.random.default_rng(0))
    assert seen is not None
    for _ in range(200):
        learner.dataset.add(seen.observations[0], np.array([0.5, 0.5, 0.0], np.float32))
    learner.dataset.add(seen.observations[0], np.full(3, 1 / 3, np.float32))
    # The next update's minibatch, drawn from a copy of the learner's generator.
    batch = learner.dataset.sample(config.distill.batch_size, copy.deepcopy(learner.rng))
    assert batch is not None and not (batch.targets > 0).all(axis=1).any()
    assert ((batch.targets > 0).sum(axis=1) == 2).any()
    with torch.no_grad():
        logits = learner.model(torch.from_numpy(batch.observations))
    targets = torch.from_numpy(batch.targets)
    loss = learner.update()
    assert loss is not None
    assert float(loss) == pytest.approx(float(safe_set_nll(logits, targets)), rel=1e-5)
    assert float(loss) != pytest.approx(float(soft_cross_entropy(logits, targets)), rel=1e-3)


def test_beta_decay_steps_null_hands_the_play_to_the_student_within_the_budget(
    tmp_path: Path,
) -> None:
    """`beta_decay_steps: null`: beta follows the run's budget (here 60 steps), so the
    teacher acts at first and the student by the end, whatever the budget's size."""
    config = _cheap_config(
        total_steps=60,
        distill={"beta_decay_steps": None},
        checkpoint={"every_steps": 10**6},
        logging={**QUIET, "log_every_steps": 10},
    )
    experiment = DistillExperiment(config, tmp_path / "run", print_fn=no_print)
    experiment.run()
    schedule = experiment.actor.schedule
    assert schedule(0) == 1.0 and schedule(30) == pytest.approx(0.5) and schedule(60) == 0.0
    logged = sorted(experiment.memory.history["distill/beta"])
    assert len(logged) >= 2 and logged[0][1] > logged[-1][1]
    for step, beta in logged:
        assert beta == pytest.approx(1.0 - step / 60, abs=0.1)


def test_a_refitted_student_replaces_the_acting_one_only_once_it_scores_as_well(
    tmp_path: Path,
) -> None:
    """`distill.refit_every_updates`: after 6 updates of the acting student a fresh
    candidate trains instead, the acting student untouched; it is swapped in (weights and
    Adam state, published to the actor) when it scores at least as well on held-out states,
    dropped after 6 updates without; a checkpoint keeps a candidate in training."""
    config = _cheap_config(
        total_steps=80,
        distill={"refit_every_updates": 6, "eval_every_updates": 3},
        checkpoint={"every_steps": 10**6},
    )
    experiment = DistillExperiment(config, tmp_path / "run", print_fn=no_print)
    experiment.run()
    learner, refit = experiment.learner, experiment.learner.refit
    assert refit is not None and learner.updates >= 30
    history = experiment.memory.history
    assert (
        max(dict(history["distill/refits"]).values())
        + max(dict(history["distill/refits_dropped"]).values())
        == refit.swaps + refit.dropped
        >= 2
    )
    assert "distill/candidate_holdout_accuracy" in history

    # Start a candidate by hand: the acting student does not change while it trains.
    refit.candidate, refit.phase_start = None, learner.updates - 6
    learner.update()
    candidate = refit.candidate
    assert candidate is not None and candidate.updates == 0
    student = copy.deepcopy(learner.model.state_dict())
    for _ in range(3):
        assert learner.update() is not None
    assert candidate.updates == 3
    for name, tensor in learner.model.state_dict().items():
        torch.testing.assert_close(tensor, student[name], rtol=0, atol=0)
    assert any(
        not torch.equal(tensor, student[name])
        for name, tensor in candidate.model.state_dict().items()
    )

    # A checkpoint of the learner keeps the candidate, its Adam state and its count.
    saved = learner.state_dict()
    saved_candidate = copy.deepcopy(candidate.model.state_dict())
    refit.candidate = None
    learner.load_state_dict(saved, keep_counters=True)
    restored = refit.candidate
    assert restored is not None and restored.updates == 3
    for name, tensor in restored.model.state_dict().items():
        torch.testing.assert_close(tensor, saved_candidate[name], rtol=0, atol=0)
    assert restored.optimizer.state_dict()["state"].keys() == (
        candidate.optimizer.state_dict()["state"].keys()
    )

    # Scoring below the student keeps it; as well swaps the candidate in and publishes it.
    swaps, version = refit.swaps, experiment.container.version
    refit.judge(0.9, 0.8, learner.updates)
    assert refit.candidate is restored and refit.swaps == swaps
    refit.judge(0.9, 0.9, learner.updates)
    assert refit.candidate is None and refit.swaps == swaps + 1
    assert experiment.container.version == version + 1
    for name, tensor in learner.model.state_dict().items():
        torch.testing.assert_close(tensor, saved_candidate[name], rtol=0, atol=0)
    # ... and a candidate that has had its updates without catching up is dropped.
    refit.phase_start = learner.updates - 6
    learner.update()
    assert refit.candidate is not None
    refit.candidate.updates = 6
    dropped = refit.dropped
    refit.judge(0.9, 0.5, learner.updates)
    assert refit.candidate is None and refit.dropped == dropped + 1

    with pytest.raises(ConfigError, match="choose one"):
        _cheap_config(distill={"refit_every_updates": 6, "shrink_perturb": {"every_updates": 5}})
    with pytest.raises(ConfigError, match="set holdout_fraction above 0"):
        _cheap_config(distill={"refit_every_updates": 6, "holdout_fraction": 0.0})


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def _assert_same(weights: dict[str, torch.Tensor], model: torch.nn.Module) -> None:
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, weights[name], rtol=0, atol=0)


def test_an_averaged_student_acts_while_the_optimizer_trains_the_weights_it_averages(
    tmp_path: Path,
) -> None:
    """`distill.ema_decay`: Adam trains one network, each update moves the published
    student towards it; checkpoints and resume keep both and the average's count; a refit
    candidate keeps an average of its own, which is what is judged and swapped in."""
    config = _cheap_config(
        total_steps=60,
        distill={"ema_decay": 0.9, "refit_every_updates": 6, "eval_every_updates": 3},
        checkpoint={"every_steps": 10**6},
    )
    experiment = DistillExperiment(config, tmp_path / "run", print_fn=no_print)
    experiment.run()
    learner, refit = experiment.learner, experiment.learner.refit
    average = learner.average
    assert average is not None and refit is not None and learner.updates >= 20
    assert learner.trained_model is not learner.model is experiment.container.model
    trained_params = {id(p) for p in learner.trained_model.parameters()}
    assert {id(p) for group in experiment.optimizer.param_groups for p in group["params"]} == (
        trained_params
    )

    # The checkpoint's student is the average; the trained weights ride in learner.pt.
    checkpoint = find_checkpoint(tmp_path / "run")
    _assert_same(checkpoint.load_torch(MODEL_FILE)["learner"], learner.model)
    resumed = DistillExperiment.from_run_dir(tmp_path / "run", total_steps=80, print_fn=no_print)
    try:
        resumed.build()
        _assert_same(_weights(learner.model), resumed.learner.model)
        _assert_same(_weights(learner.trained_model), resumed.learner.trained_model)
        assert resumed.learner.average is not None
        assert resumed.learner.average.count == average.count
    finally:
        resumed.close()

    # One update outside a refit: Adam moves the trained weights, the average follows.
    refit.candidate, refit.phase_start = None, learner.updates
    before, version = _weights(learner.model), experiment.container.version
    kept = average.current_decay()
    assert learner.update() is not None and experiment.container.version == version + 1
    for name, tensor in learner.model.state_dict().items():
        expected = kept * before[name] + (1 - kept) * learner.trained_model.state_dict()[name]
        torch.testing.assert_close(tensor, expected, rtol=1e-5, atol=1e-6)

    # A candidate trains its own network and averages it; swapped in, both replace the
    # student's and the student's average goes on from the candidate's count.
    refit.phase_start = learner.updates - 6
    learner.update()
    candidate = refit.candidate
    assert candidate is not None and candidate.average is not None
    for _ in range(3):
        assert learner.update() is not None
    assert candidate.average.count == 3 and candidate.acting is not candidate.model
    averaged, trained = _weights(candidate.acting), _weights(candidate.model)
    refit.judge(0.5, 0.5, learner.updates)
    assert refit.candidate is None
    _assert_same(averaged, learner.model)
    _assert_same(trained, learner.trained_model)
    assert average.count == 3

    with pytest.raises(ConfigError, match=r"ema_decay and distill\.shrink_perturb"):
        _cheap_config(distill={"ema_decay": 0.9, "shrink_perturb": {"every_updates": 5}})
    with pytest.raises(ConfigError, match="ema_decay"):
        _cheap_config(distill={"ema_decay": 1.0})


def test_an_ensemble_student_acts_on_its_members_mean_policy_and_trains_them_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`distill.members`: the student is that many networks, each drawn afresh and given a
    minibatch of its own at each update; greedy play, evaluation and the ONNX export act
    on the mean of their policies. A run cannot start from an ensemble (`--init-from`)."""
    config = _cheap_config(total_steps=40, distill={"members": 3})
    run_dir = tmp_path / "run"
    experiment = DistillExperiment(config, run_dir, print_fn=no_print)
    experiment.run()
    ensemble, learner = experiment.learner.model, experiment.learner
    assert isinstance(ensemble, StudentEnsemble) and len(ensemble) == 3
    assert learner.updates > 5

    held = experiment.dataset.holdout(50, np.random.default_rng(0))
    assert held is not None
    observations = torch.from_numpy(held[0])
    with torch.no_grad():
        members = torch.stack([torch.softmax(m(observations), -1) for m in ensemble.members])
        mean = members.mean(dim=0)
        torch.testing.assert_close(torch.exp(ensemble(observations)), mean)
    assert torch.equal(ensemble.greedy_actions(observations), mean.argmax(dim=-1))
    assert not torch.allclose(members[0], members[1])  # drawn and trained apart

    # One update: every member learns, each from its own 8 of the 24 states drawn.
    batches: list[int] = []
    sample = experiment.dataset.sample

    def recording_sample(size: int, rng: np.random.Generator) -> Any:
        batches.append(size)
        return sample(size, rng)

    experiment.dataset.sample = recording_sample  # type: ignore[method-assign]
    before = [_weights(m) for m in ensemble.members]
    assert learner.update() is not None and batches == [3 * 8]
    for member, weights in zip(ensemble.members, before, strict=True):
        assert any(not torch.equal(weights[n], t) for n, t in member.state_dict().items())

    # The checkpoint holds all three; evaluate and export play the mean policy.
    resumed = DistillExperiment.from_run_dir(run_dir, total_steps=60, print_fn=no_print)
    try:
        resumed.build()
        _assert_same(
            find_checkpoint(run_dir).load_torch(MODEL_FILE)["learner"], resumed.learner.model
        )
    finally:
        resumed.close()
    assert main(["evaluate", str(run_dir), "--episodes", "2"]) == 0
    out = tmp_path / "ensemble.onnx"
    assert main(["export", str(run_dir), "--out", str(out)]) == 0
    session = onnxruntime.InferenceSession(str(out))
    checkpointed = DistillExperiment.build_model(config, tuple(observations.shape[1:]), 3)
    checkpointed.load_state_dict(find_checkpoint(run_dir).load_torch(MODEL_FILE)["learner"])
    action, _ = session.run(None, {"observation": observations.numpy()})
    assert np.array_equal(action, checkpointed.greedy_actions(observations).numpy())

    ppo = PPOExperimentConfiguration.from_dict({"game": "catch", "logging": QUIET})
    with pytest.raises(ConfigError, match="an ensemble of 3 networks"):
        PPOExperiment(ppo, tmp_path / "ppo", print_fn=no_print, init_from=run_dir)
    assert not (tmp_path / "ppo").exists()


def test_the_teacher_intervenes_where_the_student_would_lose_a_life(tmp_path: Path) -> None:
    """An untrained student plays every step (beta 0, no update); with `intervene` the
    teacher (horizon 10, which sees each falling block in time) overrides its losing moves:
    both envs keep all 5 lives, and each overridden state is marked critical. (Without
    `intervene` the same run loses a life.)"""
    config = _cheap_config(
        total_steps=150,
        distill={
            "horizon": 10,
            "verify_budget": 0,
            "beta_start": 0.0,
            "learning_starts": 10**6,
            "holdout_fraction": 0.0,
            "critical_steps": 1,
            "intervene": True,
        },
        checkpoint={"every_steps": 10**6},
    )
    experiment = DistillExperiment(config, tmp_path / "run", print_fn=no_print)
    summary = experiment.run()
    assert summary["teacher_actions"] == summary["interventions"] > 0
    assert [state.last_lives for state in experiment.actor.lifecycle] == [5, 5]
    assert experiment.dataset.criticals == summary["interventions"]


def test_the_actor_waits_for_a_learner_that_falls_behind_updates_per_step(
    tmp_path: Path,
) -> None:
    """Eight updates of 256 states per label take far longer than a cheap label on catch:
    the actor waits for the learner, so the run makes the updates it was asked for
    (within max_lag_updates, and the labels of the last batch), not what time allowed."""
    config = _cheap_config(
        total_steps=120,
        distill={"updates_per_step": 8.0, "batch_size": 256, "max_lag_updates": 4},
        checkpoint={"every_steps": 10**6},
    )
    experiment = DistillExperiment(config, tmp_path / "run", print_fn=no_print)
    summary = experiment.run()
    due = int((summary["labels"] - 8) * 8.0)
    assert due - 4 - 8 * 2 <= summary["updates"] <= due
    assert experiment.actor.gate.actor_wait_s > 0


def test_evaluate_and_export_a_distill_run(
    distill_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    args = ["evaluate", str(distill_run), "--episodes", "2", "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    # The latest checkpoint: step 40, or 60 once the resume test has run in this process.
    assert result["episodes"] == 2 and result["step"] == find_checkpoint(distill_run).step
    assert main(["evaluate", str(distill_run), "--epsilon", "0.1"]) == 2
    assert "a distill agent plays its policy" in capsys.readouterr().err
    out = tmp_path / "student.onnx"
    assert main(["export", str(distill_run), "--out", str(out)]) == 0
    assert out.stat().st_size > 0


def _student(run_dir: Path) -> dict[str, torch.Tensor]:
    weights: dict[str, torch.Tensor] = find_checkpoint(run_dir, best=True).load_torch(MODEL_FILE)[
        "learner"
    ]
    return weights


def test_init_from_loads_the_student_into_ppo(distill_run: Path, tmp_path: Path) -> None:
    config = PPOExperimentConfiguration.from_dict(
        {
            "game": "catch",
            "total_steps": 64,
            "env": {"num_envs": 2, "backend": "inline", "observation": RAM},
            "model": {"input_scale": 0.03125},
            "logging": QUIET,
        }
    )
    experiment = PPOExperiment(config, tmp_path / "ppo", print_fn=no_print, init_from=distill_run)
    try:
        experiment.build()
        student = _student(distill_run)
        for model in (experiment.learner_model, experiment.actor_model):
            for name, tensor in model.state_dict().items():
                torch.testing.assert_close(tensor, student[name], rtol=0, atol=0)
        record = json.loads((tmp_path / "ppo" / INIT_FROM_FILE).read_text())
        assert record["run"] == str(distill_run.resolve()) and "whole network" in record["loaded"]
    finally:
        experiment.close()
    wider = config.model_copy(
        update={"model": config.model.model_copy(update={"cnn_features": 8, "mlp_hidden": [32]})}
    )
    with pytest.raises(ConfigError, match="does not match this run's model"):
        PPOExperiment(wider, tmp_path / "ppo2", print_fn=no_print, init_from=distill_run).build()
    assert not (tmp_path / "ppo2").exists()


def test_init_from_copies_the_student_torso_into_dqn(distill_run: Path, tmp_path: Path) -> None:
    config = DQNExperimentConfiguration.from_dict(
        {
            "game": "catch",
            "total_steps": 64,
            "env": {"num_envs": 2, "backend": "inline", "observation": RAM},
            "model": {"mlp_hidden": [64, 64]},
            "logging": QUIET,
        }
    )
    experiment = DQNExperiment(config, tmp_path / "dqn", print_fn=no_print, init_from=distill_run)
    try:
        experiment.build()
        student = _student(distill_run)
        torso = [name for name in student if name.startswith("torso.")]
        assert len(torso) == 4
        for model in (experiment.learner_model, experiment.actor_model, experiment.target_model):
            weights = model.state_dict()
            for name in torso:
                torch.testing.assert_close(weights[name], student[name], rtol=0, atol=0)
        record = json.loads((tmp_path / "dqn" / INIT_FROM_FILE).read_text())
        assert record["loaded"].startswith("4 of the student's 4 torso tensors")
    finally:
        experiment.close()
    narrow = config.model_copy(
        update={"model": config.model.model_copy(update={"mlp_hidden": [16]})}
    )
    with pytest.raises(ConfigError, match="none of the student's 4 torso tensors"):
        DQNExperiment(narrow, tmp_path / "dqn2", print_fn=no_print, init_from=distill_run).build()


def test_train_init_from_records_the_student_in_the_summary(
    distill_run: Path, tmp_path: Path
) -> None:
    config = PPOExperimentConfiguration.from_dict(
        {
            "game": "catch",
            "total_steps": 32,
            "env": {"num_envs": 2, "backend": "inline", "observation": RAM},
            "model": {"input_scale": 0.03125},
            "ppo": {"rollout_steps": 16, "minibatches": 2},
            "tester": {"enabled": False},
            "logging": QUIET,
        }
    )
    path = tmp_path / "ppo.yaml"
    path.write_text(config.to_yaml())
    run_dir = tmp_path / "run"
    args = ["train", "--config", str(path), "--run-dir", str(run_dir), "--quiet"]
    assert main([*args, "--init-from", str(distill_run)]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["init_from"]["run"] == str(distill_run.resolve())
    assert main(["train", "--resume", str(run_dir), "--init-from", str(distill_run)]) == 2
    with pytest.raises(ConfigError, match="is a ppo run; a run starts from the student"):
        PPOExperiment(config, tmp_path / "again", init_from=run_dir)


# -- the anchor to the student (init_anchor) -----------------------------------------------


def test_the_anchor_weight_falls_linearly_and_its_kl_pulls_towards_the_student() -> None:
    student = torch.nn.Linear(3, 4)
    anchor = StudentAnchor(student, InitAnchorSettings(coef=2.0, decay_steps=100))
    assert [anchor.coefficient(s) for s in (0, 25, 100, 500)] == [2.0, 1.5, 0.0, 0.0]
    observations = torch.randn(16, 3)
    same = torch.log_softmax(student(observations), dim=-1).detach()
    assert float(anchor.kl(observations, same)) == pytest.approx(0.0, abs=1e-6)
    logits = torch.zeros(16, 4, requires_grad=True)
    before = anchor.kl(observations, torch.log_softmax(logits, dim=-1))
    before.backward()  # type: ignore[no-untyped-call]
    assert logits.grad is not None
    stepped = (logits - 1.0 * logits.grad).detach()
    after = anchor.kl(observations, torch.log_softmax(stepped, dim=-1))
    assert 0 < float(after) < float(before.detach())
    # An action the student never takes (a -inf logit) adds nothing.
    masked = StudentAnchor(_NeverLast(), InitAnchorSettings())
    assert math.isfinite(float(masked.kl(observations, torch.log_softmax(logits.detach(), dim=-1))))


class _NeverLast(torch.nn.Module):
    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(len(observations), 4)
        logits[:, -1] = -math.inf
        return logits


def _ppo_from_student(anchor: dict[str, Any] | None, steps: int = 64) -> PPOExperimentConfiguration:
    data: dict[str, Any] = {
        "game": "catch",
        "total_steps": steps,
        "seed": 1,
        "torch_threads": 1,
        "env": {"num_envs": 2, "backend": "inline", "observation": RAM},
        "model": {"input_scale": 0.03125},
        "ppo": {"rollout_steps": 16, "minibatches": 2, "learning_rate": 0.01},
        "tester": {"enabled": False},
        "logging": QUIET,
    }
    if anchor is not None:
        data["init_anchor"] = anchor
    return PPOExperimentConfiguration.from_dict(data)


def _kl_to_student(distill_run: Path, experiment: Any, student: StudentAnchor) -> float:
    """KL(student || the run's policy) on the states the distill run labelled."""
    saved = find_checkpoint(distill_run).load_numpy(DATASET_FILE)["observations"]
    observations = torch.from_numpy(saved)
    with torch.no_grad():
        policy = torch.log_softmax(experiment.learner_model(observations), dim=-1)
    return float(student.kl(observations, policy))


def test_an_anchored_ppo_run_stays_near_its_student_and_resumes_anchored(
    distill_run: Path, tmp_path: Path
) -> None:
    kls = {}
    for coef in (0.0, 20.0):
        config = _ppo_from_student({"coef": coef, "decay_steps": 10_000})
        run_dir = tmp_path / f"coef{coef:g}"
        experiment = PPOExperiment(config, run_dir, print_fn=no_print, init_from=distill_run)
        experiment.run()
        anchor = experiment.context.student_anchor
        if coef == 0:
            assert anchor is None and not (run_dir / INIT_STUDENT_DIR).exists()
            kept = StudentAnchor(PPOExperiment.build_model(config, (3,), 3), InitAnchorSettings())
            kept.student.load_state_dict(_student(distill_run))
            kls[coef] = _kl_to_student(distill_run, experiment, kept)
            continue
        assert anchor is not None and (run_dir / INIT_STUDENT_DIR).is_dir()
        step, weight = experiment.memory.history["train/anchor_coef"][0]
        assert step == 32 and weight == pytest.approx(20.0 * (1 - 32 / 10_000))
        first_kl = experiment.memory.history["train/anchor_loss"][0][1]
        assert first_kl < 0.05  # the run starts as the student
        kls[coef] = _kl_to_student(distill_run, experiment, anchor)
        resumed = PPOExperiment.from_run_dir(run_dir, total_steps=96, print_fn=no_print)
        resumed.run()
        assert resumed.context.student_anchor is not None
        assert "train/anchor_loss" in resumed.memory.latest
    assert kls[20.0] < 0.5 * kls[0.0], kls


def test_a_value_warmup_trains_the_critic_while_the_policy_stays_the_students(
    distill_run: Path, tmp_path: Path
) -> None:
    kls, value_heads = {}, {}
    for warmup in (0, 10_000):
        anchor = {"coef": 1.0, "decay_steps": 1_000, "value_warmup_steps": warmup}
        experiment = PPOExperiment(
            _ppo_from_student(anchor, steps=128),
            tmp_path / f"warmup{warmup}",
            print_fn=no_print,
            init_from=distill_run,
        )
        experiment.run()
        student = experiment.context.student_anchor
        assert student is not None
        kls[warmup] = _kl_to_student(distill_run, experiment, student)
        history = experiment.memory.history
        value_heads[warmup] = experiment.learner_model.state_dict()
        if warmup:
            # Value head alone, the anchor at its full weight, all run long.
            assert {v for _, v in history["train/value_warmup"]} == {1.0}
            assert {v for _, v in history["train/anchor_coef"]} == {1.0}
        else:
            assert {v for _, v in history["train/value_warmup"]} == {0.0}
            assert history["train/anchor_coef"][-1][1] < 1.0
    # The critic learned in both; only the warm-up kept the policy at the student's.
    start = _student(distill_run)
    for heads in value_heads.values():
        changed = [not torch.equal(heads[k], start[k]) for k in start if "value" in k]
        assert changed and all(changed)
    assert kls[10_000] < 0.25 * kls[0], kls
    with pytest.raises(ConfigError, match=r"value_warmup_steps needs init_anchor\.coef > 0"):
        _ppo_from_student({"coef": 0.0, "value_warmup_steps": 100})
    with pytest.raises(ConfigError, match="value_warmup_steps is PPO's"):
        DQNExperimentConfiguration.from_dict({"init_anchor": {"value_warmup_steps": 100}})


def test_an_anchored_dqn_run_ranks_the_students_action_first(
    distill_run: Path, tmp_path: Path
) -> None:
    config = DQNExperimentConfiguration.from_dict(
        {
            "game": "catch",
            "total_steps": 800,
            "torch_threads": 1,
            "env": {"num_envs": 2, "backend": "inline", "observation": RAM},
            "model": {"mlp_hidden": [64, 64]},
            "learner": {
                "learning_starts": 32,
                "batch_size": 16,
                "replay_ratio": 2.0,
                "learning_rate": 1e-3,
                "log_every_updates": 10,
            },
            "init_anchor": {"coef": 5.0, "decay_steps": 10_000},
            "tester": {"enabled": False},
            "logging": QUIET,
        }
    )
    experiment = DQNExperiment(config, tmp_path / "dqn", print_fn=no_print, init_from=distill_run)
    experiment.run()
    assert "train/anchor_agreement" in experiment.memory.latest
    # The Q heads start afresh: the margin loss teaches them the student's ranking. Measured
    # on the distilled states over seeds 0-3: 0.94-0.97 agreement, and 0.42-0.66 unanchored.
    # Where the resume test has first taken the run to 60 steps (a student of more states,
    # learned with its labelling thread's timing), 0.80-0.84 in 2 of 12 runs under load.
    anchor = experiment.context.student_anchor
    assert anchor is not None
    observations = torch.from_numpy(
        find_checkpoint(distill_run).load_numpy(DATASET_FILE)["observations"]
    )
    with torch.no_grad():
        greedy = experiment.learner_model(observations).argmax(dim=1)
    agreement = float((greedy == anchor.actions(observations)).float().mean())
    assert agreement >= 0.75, agreement


def test_init_anchor_is_refused_where_it_would_do_nothing(
    distill_run: Path, tmp_path: Path
) -> None:
    config = _ppo_from_student({"coef": 0.5})
    with pytest.raises(ConfigError, match="init_anchor: anchors a run started from a distilled"):
        PPOExperiment(config, tmp_path / "alone", print_fn=no_print)
    # A saved configuration lists every setting, the anchor's defaults too: not a choice.
    saved = PPOExperimentConfiguration.from_dict(yaml.safe_load(_ppo_from_student(None).to_yaml()))
    PPOExperiment(saved, tmp_path / "saved", print_fn=no_print)
    narrowed = _ppo_from_student(None).model_copy(
        update={"env": _ppo_from_student(None).env.model_copy(update={"allowed_actions": [0, 1]})}
    )
    experiment = PPOExperiment(
        narrowed, tmp_path / "narrow", print_fn=no_print, init_from=distill_run
    )
    with pytest.raises(ConfigError, match=r"init_anchor\.coef: the student chooses among all"):
        experiment.build()
