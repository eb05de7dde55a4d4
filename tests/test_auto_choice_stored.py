"""`observation: auto` is chosen once, when a run starts: its `config.yaml` stores the
observation chosen, so a resume uses that observation without choosing again (a rule
change between versions cannot change the shape a checkpoint was trained on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.envs import observation_choice
from oakemu_rl.experiments import DQNExperiment
from oakemu_rl.runtime.checkpoints import CheckpointManager

AUTO = {"type": "auto", "frame_stack": 2}


def catch_config(total_steps: int) -> DQNExperimentConfiguration:
    """A tiny DQN run on the bundled game catch, in this process, with `observation: auto`."""
    return DQNExperimentConfiguration.from_dict(
        {
            "game": "catch",
            "total_steps": total_steps,
            "torch_threads": 1,
            "env": {"num_envs": 2, "backend": "inline", "observation": AUTO},
            "learner": {"learning_starts": 64, "batch_size": 16},
            "replay": {"capacity": 1000},
            "tester": {"enabled": False},
            "checkpoint": {"every_steps": 128, "save_replay_buffer": False},
            "logging": {"console": False, "tensorboard": False},
        }
    )


def stored_observation(run_dir: Path) -> dict[str, Any]:
    observation: dict[str, Any] = yaml.safe_load((run_dir / "config.yaml").read_text())["env"][
        "observation"
    ]
    return observation


def refuse_to_choose(*_: object) -> observation_choice.ObservationChoice:
    raise AssertionError("observation: auto was chosen again")


def test_a_run_stores_what_auto_chose_and_its_resume_does_not_choose_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    lines: list[str] = []
    config = catch_config(256)
    DQNExperiment(config, run_dir, console=False, print_fn=lines.append).run()
    assert config.env.observation.type == "auto"  # the caller's configuration is untouched
    assert any(line.startswith("observation:   auto chose attributes") for line in lines)
    stored = stored_observation(run_dir)
    assert stored["type"] == "attributes" and stored["frame_stack"] == 2
    assert stored["crop"] is None and stored["attribute_encoding"] == "planes"

    # A resume reads the stored observation: the chooser (and this process's memory of
    # its choices) is out of reach, and the run says nothing about auto.
    monkeypatch.setattr(observation_choice, "_CHOICES", {})
    monkeypatch.setattr(observation_choice, "_choose", refuse_to_choose)
    resumed_lines: list[str] = []
    resumed = DQNExperiment.from_run_dir(
        run_dir, total_steps=384, console=False, print_fn=resumed_lines.append
    )
    summary = resumed.run()
    assert resumed.restored is not None and resumed.restored.step == 256
    assert summary["steps"] == 384
    assert resumed.config.env.observation.type == "attributes"
    assert not any("auto chose" in line for line in resumed_lines)
    assert stored_observation(run_dir) == stored
    assert CheckpointManager(run_dir / "checkpoints").latest() is not None

    # A run directory written by an older version still says `auto`: its resume chooses
    # again, as before, says so, and leaves the stored setting as it was.
    monkeypatch.undo()
    data = yaml.safe_load((run_dir / "config.yaml").read_text())
    data["env"]["observation"] = {**stored, "type": "auto"}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    old_lines: list[str] = []
    old = DQNExperiment.from_run_dir(
        run_dir, total_steps=512, console=False, print_fn=old_lines.append
    )
    assert old.run()["steps"] == 512
    assert any(line.startswith("observation:   auto chose attributes") for line in old_lines)
    assert stored_observation(run_dir)["type"] == "auto"
