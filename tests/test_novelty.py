"""Exploration for sparse pickups: the count-based novelty bonus (`reward_shaping: [{type:
novelty}]`, #Exploration) and the restart pool's `novelty` priority, on their own and in
real runs on the emulator."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.experiments import DQNExperiment, PPOExperiment
from oakemu_rl.games.cells import VariableCells, controlled_variables, variable_cells
from oakemu_rl.games.loader import load_game
from oakemu_rl.ppo.config import PPOExperimentConfiguration
from oakemu_rl.runtime.config_base import ConfigError
from oakemu_rl.runtime.env_lifecycle import EnvironmentState
from oakemu_rl.runtime.reward_shaping import NoveltyBonus, RewardShapingPipeline, ScaleReward
from oakemu_rl.trajectories.restart_pool import RestartPool

pytestmark = pytest.mark.timeout(180)


def _state() -> EnvironmentState:
    return EnvironmentState(env_id=0, rng=np.random.default_rng(0))


def test_the_bonus_falls_with_the_square_root_of_the_visits_to_a_cell() -> None:
    bonus = NoveltyBonus(coef=0.5, bits=12, seed=3)
    rng = np.random.default_rng(0)
    seen = rng.integers(0, 256, size=(4, 23, 32), dtype=np.uint8)
    paid = [bonus(1.0, {}, _state(), seen) - 1.0 for _ in range(4)]
    assert paid == pytest.approx([0.5 / math.sqrt(n) for n in (1, 2, 3, 4)])
    # Observations far apart land in other cells (a 12-bit SimHash: 4096 cells).
    others = {bonus.cell(rng.integers(0, 256, size=seen.shape, dtype=np.uint8)) for _ in range(50)}
    assert len(others) > 40
    # A nearly identical observation mostly shares the cell (similar inputs, similar hash).
    nudged = seen.copy()
    nudged[0, 0, :4] ^= 1
    assert bonus.cell(nudged) == bonus.cell(seen)
    again = NoveltyBonus(coef=0.5, bits=12, seed=3)
    again.load_state_dict(bonus.state_dict())
    assert again.visits(bonus.cell(seen)) == 4 and again.counts == bonus.counts


def test_the_pipeline_reports_the_bonus_as_a_term_of_its_own() -> None:
    novelty = NoveltyBonus(coef=0.2, bits=8)
    pipeline = RewardShapingPipeline([ScaleReward(2.0), novelty])
    assert pipeline.novelty is novelty
    observation = np.ones((3, 4), dtype=np.uint8)
    assert pipeline(1.0, {}, _state(), observation) == pytest.approx(2.2)
    assert pipeline.last_terms == {"bonus:novelty": pytest.approx(0.2)}
    assert RewardShapingPipeline([ScaleReward(2.0)]).novelty is None
    with pytest.raises(ValueError, match="needs each step's next observation"):
        pipeline(1.0, {}, _state())
    scalars = pipeline.scalars()
    assert scalars["reward/novelty_cells"] == 1.0
    assert scalars["reward/novelty_bonus"] == pytest.approx(0.2)


def test_the_restart_pool_draws_the_least_visited_cells_most() -> None:
    visits = {1: 1, 2: 100}
    pool = RestartPool(2, priority="novelty", visits=lambda cell: visits.get(cell, 0))
    assert pool.add(b"rare", episode_return=0.0, episode_step=1, cell=1)
    assert pool.add(b"common", episode_return=0.0, episode_step=2, cell=2)
    rng = np.random.default_rng(0)
    drawn = [pool.sample(rng) for _ in range(2000)]
    rare = sum(entry is not None and entry.state == b"rare" for entry in drawn) / len(drawn)
    assert rare == pytest.approx(10 / 11, abs=0.03)  # weights 1/sqrt(1) : 1/sqrt(100)
    # Full: a new state replaces the most visited one, unless it is more visited still.
    visits[3] = 5
    assert pool.add(b"newer", episode_return=0.0, episode_step=3, cell=3)
    assert {e.state for e in pool.entries} == {b"rare", b"newer"}
    visits[4] = 1000
    assert not pool.add(b"stale", episode_return=0.0, episode_step=4, cell=4)
    restored = RestartPool(2, priority="novelty", visits=lambda cell: visits.get(cell, 0))
    restored.load_state_dict(pool.state_dict())
    assert [e.cell for e in restored.entries] == [e.cell for e in pool.entries]
    with pytest.raises(ValueError, match="'novelty' needs the cells' visit counts"):
        RestartPool(2, priority="novelty")


def _config(**overrides: Any) -> PPOExperimentConfiguration:
    data: dict[str, Any] = {
        "game": "catch",
        "total_steps": 512,
        "torch_threads": 1,
        "env": {"num_envs": 2, "backend": "inline"},
        "ppo": {"rollout_steps": 64, "epochs": 1},
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": 512},
        "logging": {"console": False, "tensorboard": False, "log_every_steps": 128},
        "reward_shaping": [{"type": "novelty", "coef": 0.05, "bits": 10}],
        "restart_pool": {
            "enabled": True,
            "priority": "novelty",
            "save_every_steps": 8,
            "restart_probability": 0.5,
        },
    }
    return PPOExperimentConfiguration.from_dict(data | overrides)


def test_a_run_with_the_bonus_logs_it_and_resumes_its_counts(tmp_path: Path) -> None:
    experiment = PPOExperiment(_config(), tmp_path / "run", console=False)
    experiment.run()
    novelty = experiment.actor.reward_shaping.novelty
    assert novelty is not None and sum(novelty.counts.values()) == 512
    assert 1 < len(novelty.counts) <= 2**10
    history = experiment.memory.history
    paid = [value for _, value in history["episode/reward/bonus:novelty"]]
    assert paid and all(value > 0 for value in paid)
    # The shaped return is the game's return plus the bonus.
    returns = [value for _, value in history["episode/return"]]
    shaped = [value for _, value in history["episode/shaped_return"]]
    for game, bonus, total in zip(returns, paid, shaped, strict=True):
        assert total == pytest.approx(game + bonus)
    pool = experiment.actor._restart_pool
    assert pool is not None and len(pool) > 0
    assert all(entry.cell is not None for entry in pool.entries)
    assert pool.total_sampled > 0

    resumed = PPOExperiment.from_run_dir(tmp_path / "run", total_steps=640, console=False)
    resumed.build()
    try:
        again = resumed.actor.reward_shaping.novelty
        assert again is not None and again.counts == novelty.counts
    finally:
        resumed.close()


def test_novelty_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"add \{type: novelty\} to reward_shaping"):
        _config(reward_shaping=[])
    with pytest.raises(ConfigError, match="2 'novelty' entries"):
        _config(reward_shaping=[{"type": "novelty"}, {"type": "novelty"}])
    with pytest.raises(ConfigError, match="bits"):
        _config(reward_shaping=[{"type": "novelty", "bits": 40}])


def test_dqn_learns_from_the_bonus_too(tmp_path: Path) -> None:
    config = DQNExperimentConfiguration.from_dict(
        {
            "game": "catch",
            "total_steps": 256,
            "torch_threads": 1,
            "env": {"num_envs": 2, "backend": "inline"},
            "learner": {"learning_starts": 64, "batch_size": 16},
            "tester": {"enabled": False},
            "logging": {"console": False, "tensorboard": False},
            "reward_shaping": [{"type": "novelty", "coef": 0.05, "bits": 10}],
        }
    )
    experiment = DQNExperiment(config, tmp_path / "dqn", console=False)
    experiment.run()
    # Every step's next observation went through the bonus on its way to replay.
    novelty = experiment.actor.reward_shaping.novelty
    assert novelty is not None and sum(novelty.counts.values()) == 256
    assert experiment.actor.reward_shaping.last_terms["bonus:novelty"] > 0


def test_the_probe_finds_the_variables_the_actions_move() -> None:
    # Deep Dive declares 17 variables: the diver's position and air move with the keys; the
    # jellyfish, the pearl, the score and the random seed do not.
    cells = variable_cells(load_game("deep_dive"))
    assert set(cells.names) == {"diver_x", "diver_y", "air"}
    assert controlled_variables(load_game("catch")) == ["paddle_x"]
    # Bins span random play's spread in about `levels` steps: the 32 columns in bins of 4.
    width = dict(zip(cells.names, cells.widths, strict=True))["diver_x"]
    assert 2 <= width <= 4
    values = {"diver_x": 5, "diver_y": 2, "air": 112}
    same_bin = values | {"diver_x": (5 // width) * width + width - 1}
    assert cells.cell(values) == cells.cell(same_bin)
    assert cells.cell(values) != cells.cell(values | {"diver_x": 5 + width})
    named = variable_cells(load_game("deep_dive"), ["pearl_y"], levels=1)
    assert named.names == ("pearl_y",) and named.widths[0] >= 1
    with pytest.raises(ValueError, match=r"\['diver_z'\] are not data variables of 'Deep Dive'"):
        variable_cells(load_game("deep_dive"), ["diver_z"])


def test_a_bonus_on_variable_cells_counts_positions_not_screens() -> None:
    cells = VariableCells(("x", "y"), (4, 1))
    bonus = NoveltyBonus(coef=0.5, variables=cells)
    screen = np.zeros((2, 3), dtype=np.uint8)
    other_screen = np.full((2, 3), 255, dtype=np.uint8)
    assert bonus(0.0, {"values": {"x": 1, "y": 2}}, _state(), screen) == pytest.approx(0.5)
    # Another screen in the same bin of x is the same cell; another y is a new one.
    paid = bonus(0.0, {"values": {"x": 3, "y": 2}}, _state(), other_screen)
    assert paid == pytest.approx(0.5 / math.sqrt(2))
    assert bonus(0.0, {"values": {"x": 3, "y": 3}}, _state(), screen) == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"need each step's info\['values'\]"):
        bonus(0.0, {}, _state(), screen)


def test_a_run_with_variable_cells_names_them_and_restarts_from_rare_ones(
    tmp_path: Path,
) -> None:
    printed: list[str] = []
    shaping = [{"type": "novelty", "coef": 0.05, "cell": "variables"}]
    experiment = PPOExperiment(
        _config(reward_shaping=shaping), tmp_path / "run", console=False, print_fn=printed.append
    )
    experiment.run()
    assert any(line.startswith("novelty cells: paddle_x (bins of") for line in printed)
    novelty = experiment.actor.reward_shaping.novelty
    assert novelty is not None and novelty.variables is not None
    # Catch's paddle has 32 columns at most: a handful of cells, not one per screen.
    assert 1 < len(novelty.counts) <= 32
    pool = experiment.actor._restart_pool
    assert pool is not None and {entry.cell for entry in pool.entries} <= set(novelty.counts)


def test_variable_cell_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ConfigError, match="variables apply to another cell than 'observation'"):
        _config(reward_shaping=[{"type": "novelty", "variables": ["paddle_x"]}])
    with pytest.raises(ConfigError, match="bits apply to another cell than 'variables'"):
        _config(reward_shaping=[{"type": "novelty", "cell": "variables", "bits": 8}])
    gym = DQNExperimentConfiguration.from_dict(
        {"game": "gym:CartPole-v1", "reward_shaping": [{"type": "novelty", "cell": "variables"}]}
    )
    with pytest.raises(ValueError, match="reads an OakEmu game's data variables"):
        RewardShapingPipeline.from_config(gym.reward_shaping, game=gym.game)
