"""ONNX export: DQN and PPO, CNN and MLP torsos, noisy nets; checked graphs with any batch
size, metadata inside, outputs equal to PyTorch's, and play-onnx playing evaluate's
episodes without importing torch."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch

from oakemu_rl.envs import make_env
from oakemu_rl.experiments import EXPERIMENTS, evaluate_checkpoint, find_checkpoint
from oakemu_rl.experiments.evaluation import load_checkpoint_model, read_checkpoint_config
from oakemu_rl.export import OnnxPolicy, PolicyFileError, play_onnx
from oakemu_rl.export.onnx_export import export_policy
from oakemu_rl.games.loader import bundled_games

pytestmark = pytest.mark.timeout(300)

SCREEN = {"type": "screen", "height": 32, "width": 32, "frame_stack": 2}
RAM = {"type": "ram", "ram": ["ball_x", "ball_y", "paddle_x"], "frame_stack": 1}
VARIANTS: dict[str, dict[str, Any]] = {
    "dqn-cnn": {"algo": "dqn", "env": {"observation": SCREEN}, "model": {"torso": "small_cnn"}},
    "dqn-noisy-mlp": {
        "algo": "dqn",
        "env": {"observation": RAM, "allowed_actions": [0, 2]},
        "model": {"torso": "mlp", "noisy": True},
        "exploration": {"type": "noisy"},
    },
    "ppo-cnn": {"algo": "ppo", "env": {"observation": SCREEN}, "model": {"torso": "small_cnn"}},
    "ppo-mlp": {"algo": "ppo", "env": {"observation": RAM}, "model": {"torso": "mlp"}},
    "ppo-cell-cnn": {
        "algo": "ppo",
        "env": {"observation": {"type": "attributes", "frame_stack": 2}},
        "model": {"torso": "cell_cnn"},
    },
}


def train_small(name: str, root: Path) -> Path:
    """A short catch run of the variant `name` (its weights after a few updates)."""
    variant = VARIANTS[name]
    algo = variant["algo"]
    data: dict[str, Any] = {
        "algo": algo,
        "game": "catch",
        "total_steps": 256,
        "torch_threads": 1,
        "env": {"num_envs": 2, "backend": "inline", **variant["env"]},
        "model": variant["model"],
        "tester": {"enabled": False, "max_episode_steps": 150},
        "checkpoint": {"every_steps": 256},
        "logging": {"console": False, "tensorboard": False},
    }
    if algo == "dqn":
        data["learner"] = {"learning_starts": 64, "batch_size": 16}
        data["exploration"] = variant.get("exploration", {})
    else:
        data["ppo"] = {"rollout_steps": 32, "epochs": 1, "minibatches": 2}
    config = EXPERIMENTS[algo].config_type.from_dict(data)
    run_dir = root / name
    EXPERIMENTS[algo](config, run_dir, console=False, print_fn=lambda _: None).run()
    return run_dir


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("export")
    files = {}
    for name in VARIANTS:
        run_dir = train_small(name, root)
        files[name] = (run_dir, export_policy(run_dir, root / f"{name}.onnx").path)
    return files


def recorded_observations(run_dir: Path, count: int = 24) -> np.ndarray:
    """Observations of a random player, as the env gives them."""
    _, config = read_checkpoint_config(find_checkpoint(run_dir))
    env = make_env(config.game, config.env.observation)
    rng = np.random.default_rng(0)
    observation, _ = env.reset(seed=3)
    observations = [observation]
    while len(observations) < count:
        observation, _, terminated, truncated, _ = env.step(int(rng.integers(3)))
        observations.append(observation)
        if terminated or truncated:
            observation, _ = env.reset()
    env.close()
    return np.stack(observations)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_an_exported_policy_matches_pytorch_on_any_batch_size(
    name: str, exported: dict[str, tuple[Path, Path]]
) -> None:
    run_dir, path = exported[name]
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    assert max(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")) >= 17
    batch_dim = proto.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch_dim.dim_param and not batch_dim.dim_value  # a named, dynamic batch size

    checkpoint = find_checkpoint(run_dir)
    _, config = read_checkpoint_config(checkpoint)
    observations = recorded_observations(run_dir)
    model = load_checkpoint_model(checkpoint, config, observations.shape[1:], 3)
    with torch.no_grad():
        expected = model(torch.from_numpy(observations)).numpy()
    policy = OnnxPolicy(path)
    for rows in (observations[:1], observations[:7], observations):
        actions, scores = policy.run(rows)
        np.testing.assert_allclose(scores, expected[: len(rows)], rtol=0, atol=1e-5)
        allowed = config.env.allowed_actions or [0, 1, 2]
        masked = np.where(np.isin(np.arange(3), allowed), expected[: len(rows)], -np.inf)
        np.testing.assert_array_equal(actions, masked.argmax(axis=1))
    if name == "dqn-noisy-mlp":
        assert set(policy.run(observations)[0]) <= {0, 2}  # allowed actions only


def test_the_metadata_says_what_the_policy_plays_and_how_it_sees(
    exported: dict[str, tuple[Path, Path]],
) -> None:
    meta = OnnxPolicy(exported["dqn-cnn"][1]).metadata
    catch_yaml = bundled_games()["catch"]
    assert meta.game == "catch" and meta.game_name == "Catch"
    assert meta.game_yaml_sha256 == hashlib.sha256(catch_yaml.read_bytes()).hexdigest()
    assert meta.actions == [[], ["O"], ["P"]] and meta.algo == "dqn"
    observation = meta.observation
    assert observation["kind"] == "screen" and observation["frame_stack"] == 2
    assert (observation["height"], observation["width"]) == (32, 32)
    assert observation["play_area"] == {"x": 0, "y": 8, "width": 256, "height": 184}
    assert observation["shape"] == [2, 32, 32] and observation["dtype"] == "uint8"
    ram = OnnxPolicy(exported["dqn-noisy-mlp"][1]).metadata
    assert ram.observation["kind"] == "ram" and ram.allowed_actions == [0, 2]


@pytest.mark.parametrize("name", ["dqn-cnn", "ppo-mlp"])
def test_play_onnx_plays_the_episodes_evaluate_plays(
    name: str, exported: dict[str, tuple[Path, Path]]
) -> None:
    run_dir, path = exported[name]
    checkpoint = find_checkpoint(run_dir)
    # Three worker processes on the torch side, one env in this process on ONNX's.
    torch_result = evaluate_checkpoint(
        checkpoint, 3, seed=11, num_envs=3, backend="process", deterministic=True
    ) if name.startswith("ppo") else evaluate_checkpoint(
        checkpoint, 3, seed=11, num_envs=3, backend="process"
    )  # fmt: skip
    played = play_onnx(OnnxPolicy(path), episodes=3, seed=11)
    assert played.returns == torch_result.returns
    assert played.scores == torch_result.scores
    assert played.outcomes == torch_result.outcomes
    # Both count lives the same way, and so agree on wins with no life lost.
    assert played.lives_lost == torch_result.lives_lost
    assert played.to_dict()["clean_win_rate"] == torch_result.clean_win_rate


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("dqn-cnn", {"random_policy": True}),
        ("dqn-cnn", {"epsilon": 0.5}),
        ("ppo-mlp", {"deterministic": False}),
    ],
)
def test_evaluation_plays_the_same_episodes_whatever_the_number_of_envs(
    name: str, options: dict[str, Any], exported: dict[str, tuple[Path, Path]]
) -> None:
    # Random, epsilon and sampled actions come from each episode's own generator, so
    # neither the envs' count nor the order in which their steps come back changes them.
    checkpoint = find_checkpoint(exported[name][0])
    one = evaluate_checkpoint(checkpoint, 6, seed=7, num_envs=1, backend="inline", **options)
    again = evaluate_checkpoint(checkpoint, 6, seed=7, num_envs=4, backend="process", **options)
    assert (again.returns, again.scores, again.lives_lost, again.mean_length) == (
        one.returns,
        one.scores,
        one.lives_lost,
        one.mean_length,
    )
    assert len(set(one.returns)) > 1, "the episodes should differ from one another"
    other = evaluate_checkpoint(checkpoint, 6, seed=8, num_envs=1, backend="inline", **options)
    assert other.returns != one.returns


def test_play_onnx_never_imports_torch(exported: dict[str, tuple[Path, Path]]) -> None:
    path = exported["dqn-cnn"][1]
    script = (
        "import sys\n"
        "from oakemu_rl.cli.main import main\n"
        f"code = main(['play-onnx', 'catch', {str(path)!r}, '--episodes', '1', '--json'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["episodes"] == 1


def test_a_policy_for_another_game_or_a_file_that_is_not_one_is_refused(
    exported: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    policy = OnnxPolicy(exported["dqn-cnn"][1])
    with pytest.raises(PolicyFileError, match="are not the policy's"):
        play_onnx(policy, "forest_run", episodes=1)
    with pytest.raises(PolicyFileError, match="plays catch, not gym:CartPole-v1"):
        play_onnx(policy, "gym:CartPole-v1", episodes=1)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(PolicyFileError, match=r"junk\.onnx: not an ONNX model"):
        OnnxPolicy(junk)
