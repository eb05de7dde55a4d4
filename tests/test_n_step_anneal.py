"""BBF's annealed n-step return in a DQN run: the setting, the schedule as logged, resume."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.experiments.dqn_experiment import DQNExperiment
from oakemu_rl.runtime.config_base import ConfigError


def _config(total_steps: int) -> DQNExperimentConfiguration:
    return DQNExperimentConfiguration.from_dict(
        {
            "game": "catch",
            "total_steps": total_steps,
            "torch_threads": 1,
            "env": {"num_envs": 2, "backend": "inline"},
            "replay": {"n_step": 3, "n_step_anneal": {"start": 10, "steps": 300}},
            "learner": {"learning_starts": 64, "batch_size": 16},
            "tester": {"enabled": False},
            "checkpoint": {"every_steps": 200},
            "logging": {"console": False, "tensorboard": False, "log_every_steps": 50},
        }
    )


def test_an_annealed_n_step_is_refused_below_one() -> None:
    with pytest.raises(ConfigError, match=r"replay\.n_step_anneal\.start"):
        DQNExperimentConfiguration.from_dict({"replay": {"n_step_anneal": {"start": 0}}})
    assert DQNExperimentConfiguration().replay.n_step_anneal is None


def test_a_dqn_run_anneals_its_n_step_return_and_resumes_on_schedule(tmp_path: Path) -> None:
    experiment = DQNExperiment(_config(200), tmp_path / "run", console=False)
    experiment.run()
    logged = [value for _, value in experiment.memory.history["replay/n_step"]]
    assert logged[0] >= 9 and logged == sorted(logged, reverse=True) and logged[-1] > 3
    replay = experiment.replay_buffer
    # Every transition's discount is gamma^n for the n it was written with (10 down to 3;
    # the actor hands transitions over 32 at a time, so the first ones see 32 steps done).
    discounts = replay.transitions()["discounts"]
    gamma = experiment.config.learner.gamma
    lengths = {round(math.log(d) / math.log(gamma)) for d in discounts if d > 0}
    assert max(lengths) >= 9 and min(lengths) < max(lengths) and lengths <= set(range(3, 11))
    resumed = DQNExperiment.from_run_dir(tmp_path / "run", total_steps=400, console=False)
    resumed.run()
    logged = [value for _, value in resumed.memory.history["replay/n_step"]]
    assert logged[0] < 9 and logged[-1] == 3
