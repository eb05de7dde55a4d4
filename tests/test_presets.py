"""Presets: chosen by game and algorithm, overridden by a config file and the command line;
`evaluate` takes a run's best checkpoint unless told `--last`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from oakemu_rl.cli.main import main
from oakemu_rl.cli.train_cmd import load_config
from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.experiments import EXPERIMENTS
from oakemu_rl.ppo.config import PPOExperimentConfiguration
from oakemu_rl.presets import available_presets, find_preset
from oakemu_rl.runtime.checkpoints import CheckpointManager
from test_experiment import cartpole, quiet


def test_every_shipped_preset_is_a_valid_configuration_of_its_algorithm() -> None:
    presets = available_presets()
    assert {p.name for p in presets} >= {
        "dqn/CartPole-v1",
        "ppo/CartPole-v1",
        "dqn/catch",
        "ppo/catch",
    }
    for preset in presets:
        game = f"gym:{preset.game}" if "-v" in preset.game else preset.game
        config = EXPERIMENTS[preset.algo].config_type.for_game(game)
        assert config.algo == preset.algo and config.game == game
        data = preset.settings()
        assert config.total_steps == data["total_steps"]  # the preset's own budget applies


def test_a_preset_is_found_by_bundled_name_or_gym_id_and_never_for_a_yaml_path() -> None:
    cartpole_preset = find_preset("dqn", "gym:CartPole-v1")
    assert cartpole_preset is not None and cartpole_preset.name == "dqn/CartPole-v1"
    assert find_preset("ppo", "catch") is not None
    assert find_preset("dqn", "gym:MountainCar-v0") is None
    assert find_preset("dqn", "games/catch.yaml") is None
    assert find_preset("dqn", "my_game.yml") is None


def test_a_config_file_and_the_command_line_override_fields_of_the_preset(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"learner": {"batch_size": 32}, "seed": 7}))
    config = load_config("dqn", path, "gym:CartPole-v1")
    assert isinstance(config, DQNExperimentConfiguration)
    assert config.learner.batch_size == 32 and config.seed == 7  # from the file
    assert config.learner.learning_rate == 1e-3  # from the preset, next to the file's field
    assert config.model.mlp_hidden == [128, 128] and config.total_steps == 50_000
    # The file's game picks the preset when --game is not given.
    path.write_text(yaml.safe_dump({"algo": "ppo", "game": "gym:CartPole-v1"}))
    config = load_config(None, path)
    assert isinstance(config, PPOExperimentConfiguration)
    assert config.ppo.rollout_steps == 32 and config.env.num_envs == 8
    # No preset: the defaults.
    assert load_config("ppo", None, "forest_run").ppo.rollout_steps == 64


def test_a_bad_value_over_a_preset_names_the_file_and_the_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"learner": {"batch_size": 0}}))
    args = ["train", "--config", str(path), "--game", "gym:CartPole-v1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "bad.yaml (over the preset dqn/CartPole-v1): learner.batch_size" in err


def test_config_show_says_which_preset_applies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "--algo", "ppo", "--game", "gym:CartPole-v1"]) == 0
    out = capsys.readouterr().out
    assert "# Preset: ppo/CartPole-v1" in out
    shown = yaml.safe_load(out)
    assert shown["ppo"]["rollout_steps"] == 32 and shown["total_steps"] == 100_000
    bundled = Path(__file__).parents[1] / "src/oakemu_rl/games/bundled/catch/catch.yaml"
    assert main(["config", "show", "--game", str(bundled)]) == 0
    assert "# No preset for this game" in capsys.readouterr().out


def test_evaluate_takes_the_best_checkpoint_unless_told_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    quiet(cartpole("ppo", total_steps=2048), run_dir).run()
    manager = CheckpointManager(run_dir / "checkpoints", keep_last=10)
    assert [c.step for c in manager.list()] == [512, 1024, 1536, 2048]
    manager.set_score(1024, 50.0)
    manager.set_score(1536, 20.0)
    common = ["--episodes", "1", "--json"]
    assert main(["evaluate", str(run_dir), *common]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 1024
    assert main(["evaluate", str(run_dir), "--last", *common]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 2048
    # --all plays every kept checkpoint on the same episodes and names the best by them,
    # whatever the run's own (few-episode) scores said.
    seeded = ["--episodes", "3", "--seed", "4", "--json"]
    assert main(["evaluate", str(run_dir), "--all", *seeded]) == 0
    found = json.loads(capsys.readouterr().out)
    rows = found["checkpoints"]
    assert [row["step"] for row in rows] == [512, 1024, 1536, 2048]
    assert found["step"] == max(rows, key=lambda row: row["mean_return"])["step"]
    assert main(["evaluate", rows[2]["checkpoint"], *seeded]) == 0
    assert json.loads(capsys.readouterr().out) == rows[2] | {"video": None}
    # A checkpoint that fails its checksums is left out, with a message.
    (Path(rows[1]["checkpoint"]) / "model.pt").write_bytes(b"corrupt")
    assert main(["evaluate", str(run_dir), "--all", *seeded]) == 0
    captured = capsys.readouterr()
    assert [row["step"] for row in json.loads(captured.out)["checkpoints"]] == [512, 1536, 2048]
    assert "skipping checkpoint" in captured.err
    assert main(["evaluate", str(run_dir), "--all", "--last"]) == 2
    assert "takes neither --last nor --video" in capsys.readouterr().err
    assert main(["evaluate", rows[0]["checkpoint"], "--all"]) == 2
    assert "--all takes a run directory" in capsys.readouterr().err
