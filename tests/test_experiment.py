"""One run loop for both algorithms: a target return, a rollback that gives up, a clean
run's output, and `config show`, each behaving the same for DQN and PPO."""

from __future__ import annotations

import _thread
import math
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from oakemu_rl.cli.main import main
from oakemu_rl.experiments import EXPERIMENTS, DQNExperiment, Experiment, PPOExperiment
from oakemu_rl.runtime.checkpoints import CheckpointManager
from oakemu_rl.runtime.config_base import ExperimentConfiguration


def cartpole(algo: str, **overrides: Any) -> ExperimentConfiguration:
    """A small CartPole run of `algo`, in this process (inline envs), quiet."""
    data: dict[str, Any] = {
        "algo": algo,
        "game": "gym:CartPole-v1",
        "total_steps": 2048,
        "torch_threads": 1,
        "env": {"num_envs": 4, "backend": "inline"},
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": 512, "keep_last": 10},
        "logging": {"console": False, "tensorboard": False},
    }
    if algo == "dqn":
        data["model"] = {"mlp_hidden": [32], "head_hidden": 0}
        data["learner"] = {"learning_starts": 100, "batch_size": 16}
    else:
        data["ppo"] = {"rollout_steps": 64, "epochs": 2, "minibatches": 2}
    for key, value in overrides.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    return EXPERIMENTS[algo].config_type.from_dict(data)


def quiet(config: ExperimentConfiguration, run_dir: Path) -> Experiment[Any]:
    return EXPERIMENTS[config.algo](config, run_dir, console=False, print_fn=lambda _: None)


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_a_target_return_stops_the_run_before_rollback_counts_the_evaluation(
    algo: str, tmp_path: Path
) -> None:
    # Every CartPole episode returns at least 8: the first evaluation reaches the target.
    config = cartpole(
        algo,
        total_steps=200_000,
        target_eval_return=1.0,
        tester={
            "enabled": True,
            "every_steps": 512,
            "episodes": 2,
            "num_envs": 2,
            "final_episodes": 2,
            "random_baseline": False,
        },
    )
    experiment = quiet(config, tmp_path / "run")
    summary = experiment.run()
    assert summary["stop_reason"].startswith("evaluation return")
    assert summary["steps"] < 20_000
    # The evaluation that reached the target stopped the run; rollback never watched it.
    assert experiment.rollback.best_score is None
    assert summary["evaluations"][0]["step"] == 512
    scores = {c.step: c.score for c in CheckpointManager(tmp_path / "run" / "checkpoints").list()}
    assert scores[512] is not None and scores[512] >= 1  # the evaluation scored its checkpoint


def _poison_from(experiment: Experiment[Any], first: int) -> None:
    """Make every loss from the `first`-th update (DQN) or rollout (PPO) on non-finite."""
    calls = [0]
    if isinstance(experiment, DQNExperiment):
        learner = experiment.learner
        update = learner.update

        def poisoned_update() -> dict[str, float]:
            calls[0] += 1
            metrics = update()
            if calls[0] >= first:
                metrics["loss"] = math.nan
            return metrics

        learner.update = poisoned_update  # type: ignore[method-assign]
    else:
        assert isinstance(experiment, PPOExperiment)
        buffer = experiment.rollout_buffer
        compute = buffer.compute_returns_and_advantages

        def poisoned(gamma: float, gae_lambda: float) -> None:
            calls[0] += 1
            if calls[0] >= first:
                buffer.rewards[0, 0] = math.nan
            compute(gamma, gae_lambda)

        buffer.compute_returns_and_advantages = poisoned  # type: ignore[method-assign]


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_a_rollback_that_gives_up_stops_without_checkpointing_the_broken_weights(
    algo: str, tmp_path: Path
) -> None:
    config = cartpole(algo, total_steps=4096, rollback={"max_rollbacks_without_recovery": 1})
    experiment = quiet(config, tmp_path / "run")
    experiment.build()
    # DQN: update 200 falls at step 100 + 4 x 200 = 900; PPO: rollout 6 ends at step 1536.
    _poison_from(experiment, 200 if algo == "dqn" else 6)
    summary = experiment.run()
    assert summary["stop_reason"].startswith("automatic rollback gave up")
    assert summary["total_rollbacks"] == 1
    assert summary["steps"] < 4096
    latest = CheckpointManager(tmp_path / "run" / "checkpoints").latest()
    assert latest is not None and latest.step < summary["steps"]  # the last good state
    weights = latest.load_torch("model.pt")["learner"]
    assert all(torch.isfinite(w).all() for w in weights.values())


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_ctrl_c_stops_the_run_with_a_final_checkpoint_and_no_final_evaluation(
    algo: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    config = cartpole(
        algo,
        total_steps=200_000,
        tester={"enabled": True, "every_steps": 10**6, "episodes": 2, "random_baseline": False},
    )
    experiment = quiet(config, tmp_path / "run")
    experiment.build()
    # Python's own Ctrl-C handler, whatever an earlier test in this process left installed.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))

    interrupted: list[int] = []

    def interrupt(step: int) -> None:
        if step >= 1024 and not interrupted:
            interrupted.append(step)
            _thread.interrupt_main()  # one Ctrl-C, delivered to the thread that runs the loop

    # Called on the actor's (DQN) or the learner's (PPO) thread while the loop waits.
    if isinstance(experiment, DQNExperiment):
        experiment.trainer.add_step_hook(256, interrupt)
    else:
        assert isinstance(experiment, PPOExperiment)
        experiment.learner.on_rollout = interrupt
    summary = experiment.run()
    assert summary["stop_reason"] == "interrupted"
    assert 1024 <= summary["steps"] < 200_000
    assert summary["final_eval"] is None
    latest = CheckpointManager(tmp_path / "run" / "checkpoints").latest()
    assert latest is not None and latest.step == summary["steps"]  # nothing since is lost


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_a_training_run_prints_no_warnings(algo: str, tmp_path: Path) -> None:
    config = cartpole(
        algo,
        total_steps=1024,
        env={"backend": "process", "num_workers": 1},
        tester={"enabled": True, "every_steps": 512, "episodes": 2, "final_episodes": 2},
        logging={"tensorboard": True},
    )
    path = tmp_path / "config.yaml"
    path.write_text(config.to_yaml())
    command = [sys.executable, "-m", "oakemu_rl.cli.main", "train", "--config", str(path)]
    done = subprocess.run(
        [*command, "--run-dir", str(tmp_path / "run"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert "final greedy evaluation" in done.stdout
    assert "Warning" not in done.stderr and "warning" not in done.stdout, done.stderr


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_config_show_prints_every_setting_commented_and_loadable(
    algo: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["config", "show", "--algo", algo, "--game", "gym:MountainCar-v0"]) == 0
    text = capsys.readouterr().out
    config_type = EXPERIMENTS[algo].config_type
    loaded = config_type.from_dict(yaml.safe_load(text))
    assert loaded == config_type.from_dict({"game": "gym:MountainCar-v0"})  # no preset
    lines = text.splitlines()
    comments = [line for line in lines if line.lstrip().startswith("#")]
    settings = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    assert len(comments) >= len(settings)  # every setting has its description above it
    assert "# Env steps between checkpoints." in text
    # Reward shaping is one shared top-level list (PPO's old ppo.reward_clip is gone).
    assert "\nreward_shaping: []\n" in text and "reward_clip" not in text
    # Edited and loaded again, through `train --config`'s loader.
    path = tmp_path / "edited.yaml"
    path.write_text(text.replace("every_steps: 25000", "every_steps: 5000"))
    assert config_type.from_yaml(path).checkpoint.every_steps == 5000
    # --config as the starting point: its values, the rest defaults.
    assert main(["config", "show", "--config", str(path)]) == 0
    assert "every_steps: 5000" in capsys.readouterr().out


def test_config_show_errors_name_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("algo: ppo\nppo: {epochs: 0}\n")
    assert main(["config", "show", "--config", str(path)]) == 2
    assert f"{path} (over the preset ppo/catch): ppo.epochs" in capsys.readouterr().err


def test_shared_sections_have_one_default_for_both_algorithms() -> None:
    dqn, ppo = EXPERIMENTS["dqn"].config_type(), EXPERIMENTS["ppo"].config_type()
    for section in ("env", "logging", "rollback", "restart_pool", "reward_shaping"):
        assert getattr(dqn, section) == getattr(ppo, section), section
    shared = ("every_steps", "episodes", "num_envs", "max_episode_steps", "final_episodes")
    for name in shared:
        assert getattr(dqn.tester, name) == getattr(ppo.tester, name), name
    for name in ("every_steps", "keep_last", "keep_best"):
        assert getattr(dqn.checkpoint, name) == getattr(ppo.checkpoint, name), name
    assert (dqn.seed, dqn.device, dqn.torch_threads) == (ppo.seed, ppo.device, ppo.torch_threads)
