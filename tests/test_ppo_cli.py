"""`oakemu-rl train --algo ppo`, `--resume` and `evaluate` on PPO runs; DQN stays the default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from oakemu_rl.cli.main import main
from ppo_testing import small_config
from test_experiment import cartpole, quiet


def _ppo_yaml(tmp_path: Path, **overrides: Any) -> Path:
    config = small_config(
        total_steps=512,
        ppo={"rollout_steps": 64},
        checkpoint={"every_steps": 256},
        tester={"every_steps": 10**6, "episodes": 2, "num_envs": 2, "final_episodes": 2},
        **overrides,
    )
    path = tmp_path / "ppo.yaml"
    path.write_text(config.to_yaml())
    return path


def test_train_resume_and_evaluate_a_ppo_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _ppo_yaml(tmp_path)
    run_dir = tmp_path / "run"
    # --algo is read from the config file when not given.
    assert main(["train", "--config", str(config), "--run-dir", str(run_dir), "--quiet"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["algo"] == "ppo" and summary["steps"] == 512

    assert main(["train", "--resume", str(run_dir), "--steps", "1024", "--quiet"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 1024 and summary["resumed_from_step"] == 512

    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--last", "--episodes", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["episodes"] == 3 and result["step"] == 1024 and result["mean_return"] > 0
    assert result["policy"] == "greedy"
    # --sample draws each action from the policy: on the same envs and seed, repeatable.
    sampled = ["evaluate", str(run_dir), "--last", "--episodes", "3", "--sample", "--json"]
    assert main([*sampled, "--seed", "5"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main([*sampled, "--seed", "5"]) == 0
    assert json.loads(capsys.readouterr().out) == first and first["policy"] == "stochastic"
    assert main(["evaluate", str(run_dir), "--sample", "--video", str(tmp_path / "a.gif")]) == 2
    assert "does not take --sample" in capsys.readouterr().err

    assert main(["evaluate", str(run_dir), "--epsilon", "0.1"]) == 2
    assert "--epsilon applies to DQN agents" in capsys.readouterr().err
    # The random baseline on the same envs: CartPole falls within about 20 random steps.
    assert main(["evaluate", str(run_dir), "--random", "--episodes", "8", "--json"]) == 0
    baseline = json.loads(capsys.readouterr().out)
    assert baseline["episodes"] == 8 and 8 <= baseline["mean_return"] <= 60
    assert main(["evaluate", str(run_dir), "--random", "--epsilon", "0.5"]) == 2
    assert "--random plays random actions" in capsys.readouterr().err
    assert main(["train", "--resume", str(run_dir), "--algo", "dqn"]) == 2
    assert "is a ppo run" in capsys.readouterr().err


def test_algo_flag_selects_ppo_and_errors_name_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"algo": "ppo", "ppo": {"epochs": 0}}))
    assert main(["train", "--config", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "ppo.epochs" in err
    # --algo ppo with a DQN file: the PPO schema names what does not fit.
    dqn = tmp_path / "dqn.yaml"
    dqn.write_text(yaml.safe_dump({"algo": "dqn"}))
    assert main(["train", "--algo", "ppo", "--config", str(dqn), "--quiet"]) == 2
    assert "algo" in capsys.readouterr().err


def test_dqn_remains_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from oakemu_rl.experiments import dqn_experiment, ppo_experiment

    ran: list[str] = []
    monkeypatch.setattr(dqn_experiment.DQNExperiment, "run", lambda self: ran.append("dqn") or {})
    monkeypatch.setattr(ppo_experiment.PPOExperiment, "run", lambda self: ran.append("ppo") or {})
    assert main(["train", "--game", "gym:CartPole-v1", "--run-dir", str(tmp_path / "a")]) == 0
    assert (
        main(
            [
                "train",
                "--algo",
                "ppo",
                "--game",
                "gym:CartPole-v1",
                "--run-dir",
                str(tmp_path / "b"),
            ]
        )
        == 0
    )
    assert ran == ["dqn", "ppo"]


def test_sample_is_refused_for_a_dqn_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    quiet(cartpole("dqn", total_steps=256), run_dir).run()
    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--sample"]) == 2
    assert "--sample applies to PPO and distill agents" in capsys.readouterr().err
