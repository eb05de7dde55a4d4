"""Learning: DQN solves CartPole on 3 seeds and clearly improves on the easy bundled game."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.experiments import DQNExperiment, evaluate_checkpoint, find_checkpoint


def cartpole(seed: int) -> DQNExperimentConfiguration:
    """The shipped preset (`oakemu-rl train --algo dqn --game gym:CartPole-v1`), stopping
    early once solved, quiet."""
    config = DQNExperimentConfiguration.for_game(
        "gym:CartPole-v1",
        {
            "seed": seed,
            "target_eval_return": 250.0,  # stop early, with a margin over 195
            "tester": {"num_envs": 4, "random_baseline": False, "final_episodes": 20},
            "logging": {"console": False, "tensorboard": False},
            "torch_threads": 1,
        },
    )
    assert config.total_steps == 50_000 and config.env.backend == "inline"
    return config


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dqn_solves_cartpole(seed: int, tmp_path: Path) -> None:
    experiment = DQNExperiment(
        cartpole(seed), tmp_path / "run", console=False, print_fn=lambda _: None
    )
    summary = experiment.run()
    best = summary["best_eval"]
    assert summary["steps"] <= 50_000
    assert best["episodes"] == 20 and best["mean_return"] >= 195, summary["evaluations"]
    # the saved agent, on 20 fresh greedy episodes
    checkpoint = find_checkpoint(tmp_path / "run", best=True)
    assert checkpoint.step <= 50_000
    result = evaluate_checkpoint(checkpoint, 20, backend="inline")
    assert result.episodes == 20 and result.mean_return >= 195, result


def catch_config(**overrides: Any) -> DQNExperimentConfiguration:
    data: dict[str, Any] = {
        "game": "catch",
        "total_steps": 10_000,
        "seed": 1,
        "env": {"num_envs": 8, "num_workers": 2},
        # 300-step evaluation episodes: a trained agent would otherwise play up to 2,000.
        "tester": {
            "every_steps": 10**6,
            "episodes": 10,
            "final_episodes": 10,
            "max_episode_steps": 300,
        },
        "checkpoint": {"every_steps": 10**6},
        "logging": {"console": False, "tensorboard": False},
    }
    data.update(overrides)
    return DQNExperimentConfiguration.from_dict(data)


@pytest.mark.slow
def test_dqn_improves_on_catch(tmp_path: Path) -> None:
    experiment = DQNExperiment(
        catch_config(), tmp_path / "run", console=False, print_fn=lambda _: None
    )
    summary = experiment.run()
    random, final = summary["random_baseline"], summary["final_eval"]
    assert final["episodes"] == 10
    # a random policy catches about one block in five; the trained one clearly more
    assert final["mean_score"] >= random["mean_score"] + 5, (random, final)
    assert final["mean_return"] >= random["mean_return"] + 5, (random, final)
