"""Resume: a run stopped and resumed has the same counters, schedule values, optimizer and
replay contents as one that ran straight through to the same step."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.dqn.state_adapter import ACTOR_FILE, LEARNER_FILE, MODEL_FILE, OPTIMIZER_FILE
from oakemu_rl.experiments import DQNExperiment, RunError
from oakemu_rl.runtime.checkpoints import Checkpoint

STOP, END = 600, 1200


def config(total_steps: int, save_replay: bool = True) -> DQNExperimentConfiguration:
    return DQNExperimentConfiguration.from_dict(
        {
            "game": "gym:CartPole-v1",
            "total_steps": total_steps,
            "env": {"num_envs": 2, "backend": "inline"},
            "model": {"mlp_hidden": [32], "head_hidden": 0},
            # Actions stay random (epsilon 1) so both runs take the same actions whatever
            # the learner does; the schedule still moves (it is checked below).
            "exploration": {"type": "exponential", "epsilon_start": 1.0, "epsilon_end": 1.0},
            "learner": {"learning_starts": 100, "replay_ratio": 0.25, "batch_size": 16},
            "replay": {"capacity": 5000, "n_step": 3, "prioritized": True},
            "tester": {"enabled": False},
            "checkpoint": {"every_steps": 300, "keep_last": 10, "save_replay_buffer": save_replay},
            "logging": {"console": False, "tensorboard": False},
            "torch_threads": 1,
        }
    )


def quiet(cfg: DQNExperimentConfiguration, run_dir: Path, **kwargs: Any) -> DQNExperiment:
    return DQNExperiment(cfg, run_dir, console=False, print_fn=lambda _: None, **kwargs)


def replay_arrays(checkpoint: Checkpoint) -> dict[str, Any]:
    """The saved replay buffer, without what depends on the learner's TD errors."""
    arrays: dict[str, Any] = checkpoint.load_numpy("replay.npz")
    arrays.pop("priorities", None)
    meta = json.loads(str(arrays.pop("meta")))
    meta.pop("max_priority")
    arrays["meta"] = meta
    return arrays


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("resume")
    straight = quiet(config(END), root / "straight")
    straight.run()
    stopped = quiet(config(STOP), root / "stopped")
    stopped.run()
    resumed = DQNExperiment.from_run_dir(
        root / "stopped", total_steps=END, console=False, print_fn=lambda _: None
    )
    resumed.build()  # restores the newest checkpoint
    live: dict[str, Any] = {
        "steps": resumed.trainer.steps,
        "episodes": resumed.trainer.total_episodes,
        "epsilon": resumed.trainer.policy.get_exploration_value(resumed.trainer.steps),
        "beta": resumed.learner.beta(resumed.trainer.steps),
        "updates": resumed.learner.updates,
        "replay": {k: v.copy() for k, v in resumed.replay_buffer.state_dict().items()},
        "runtime": resumed.trainer.runtime_state().to_dict(),
        "optimizer": copy.deepcopy(resumed.optimizer.state_dict()),
        "learner_weights": {k: v.clone() for k, v in resumed.learner_model.state_dict().items()},
        "actor_weights": {k: v.clone() for k, v in resumed.actor_model.state_dict().items()},
        "target_weights": {k: v.clone() for k, v in resumed.target_model.state_dict().items()},
        "rng": resumed.learner.rng.bit_generator.state,
    }
    summary = resumed.run()
    return {
        "root": root,
        "live": live,
        "summary": summary,
        "resumed": resumed,
        "straight": straight,
    }


def test_stopped_checkpoint_matches_straight_run(runs: dict[str, Any]) -> None:
    root = runs["root"]
    at_stop = Checkpoint.open(root / "straight" / "checkpoints" / f"step_{STOP:010d}")
    stopped = Checkpoint.open(root / "stopped" / "checkpoints" / f"step_{STOP:010d}")
    a, b = at_stop.read_json(ACTOR_FILE), stopped.read_json(ACTOR_FILE)
    assert a == b  # steps, episode totals and statistics, trajectories, env RNG streams
    assert a["steps"] == STOP
    ra, rb = replay_arrays(at_stop), replay_arrays(stopped)
    assert ra.keys() == rb.keys()
    assert ra.pop("meta") == rb.pop("meta")  # positions, counters, open episodes
    for key in ra:
        np.testing.assert_array_equal(ra[key], rb[key], err_msg=key)
    # the replay ratio is held exactly at checkpoints
    expected_updates = int((STOP - 100) * 0.25)
    assert at_stop.load_torch(LEARNER_FILE)["updates"] == expected_updates
    assert stopped.load_torch(LEARNER_FILE)["updates"] == expected_updates


def test_resume_restores_everything_exactly(runs: dict[str, Any]) -> None:
    live, root = runs["live"], runs["root"]
    stopped = Checkpoint.open(root / "stopped" / "checkpoints" / f"step_{STOP:010d}")
    assert live["steps"] == STOP
    assert live["runtime"] == stopped.read_json(ACTOR_FILE)
    assert live["episodes"] == stopped.read_json(ACTOR_FILE)["totals"]["total_episodes"]
    schedule = config(END)
    assert live["epsilon"] == pytest.approx(1.0)  # exponential 1 -> 1, at step 600 not 0
    assert live["beta"] == pytest.approx(0.4 + 0.6 * STOP / END)
    assert schedule.total_steps == END
    saved = stopped.load_numpy("replay.npz")
    for key, value in saved.items():
        np.testing.assert_array_equal(live["replay"][key], value, err_msg=key)
    models = stopped.load_torch(MODEL_FILE)
    for name, value in models["learner"].items():
        torch.testing.assert_close(live["learner_weights"][name], value)
    for name, value in models["actor"].items():
        torch.testing.assert_close(live["actor_weights"][name], value)
    learner_state = stopped.load_torch(LEARNER_FILE)
    assert live["updates"] == learner_state["updates"]
    for name, value in learner_state["target_model"].items():
        torch.testing.assert_close(live["target_weights"][name], value)
    assert live["rng"] == learner_state["rng"]
    optimizer = stopped.load_torch(OPTIMIZER_FILE)
    assert live["optimizer"]["param_groups"] == optimizer["param_groups"]
    for index, state in optimizer["state"].items():
        for key, value in state.items():
            torch.testing.assert_close(live["optimizer"]["state"][index][key], value)
    assert int(optimizer["state"][0]["step"]) == learner_state["updates"]


def test_resumed_run_continues_like_the_straight_run(runs: dict[str, Any]) -> None:
    summary, straight = runs["summary"], runs["straight"].summary
    assert summary["steps"] == straight["steps"] == END
    assert summary["resumed_from_step"] == STOP
    assert summary["updates"] == straight["updates"] == int((END - 100) * 0.25)
    assert summary["epsilon"] == straight["epsilon"]
    assert summary["episodes"] >= runs["live"]["episodes"]
    root = runs["root"]
    end_a = Checkpoint.open(root / "straight" / "checkpoints" / f"step_{END:010d}")
    end_b = Checkpoint.open(root / "stopped" / "checkpoints" / f"step_{END:010d}")
    ra, rb = replay_arrays(end_a), replay_arrays(end_b)
    ra.pop("meta"), rb.pop("meta")
    # what was in the buffer at the stop is still there, in the same slots
    kept = int(
        replay_arrays(Checkpoint.open(root / "stopped" / "checkpoints" / f"step_{STOP:010d}"))[
            "actions"
        ].shape[0]
    )
    for key in ("obs_ids", "next_ids", "actions", "returns", "discounts"):
        np.testing.assert_array_equal(ra[key][:kept], rb[key][:kept], err_msg=key)
    assert abs(len(ra["actions"]) - len(rb["actions"])) <= 2 * 3  # envs restart at a resume
    # the total counts of both runs' steps agree
    assert end_a.read_json(ACTOR_FILE)["steps"] == end_b.read_json(ACTOR_FILE)["steps"] == END


def test_resume_without_saved_replay_refills(tmp_path: Path) -> None:
    quiet(config(300, save_replay=False), tmp_path / "run").run()
    resumed = DQNExperiment.from_run_dir(
        tmp_path / "run", total_steps=700, console=False, print_fn=lambda _: None
    )
    summary = resumed.run()
    assert summary["steps"] == 700 and summary["resumed_from_step"] == 300
    assert summary["replay_size"] > 0
    # learning pauses for learning_starts steps after the resume, then keeps the ratio
    assert summary["updates"] == int((300 - 100) * 0.25) + int((700 - 400) * 0.25)


def test_resume_errors(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="not a directory"):
        DQNExperiment.from_run_dir(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunError, match=r"no config\.yaml"):
        DQNExperiment.from_run_dir(tmp_path / "empty")
    (tmp_path / "empty" / "config.yaml").write_text(config(100).to_yaml())
    with pytest.raises(RunError, match="no valid checkpoint"):
        DQNExperiment.from_run_dir(tmp_path / "empty").build()
