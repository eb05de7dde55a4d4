"""What users look at: learning curves from real event files, and videos of episodes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from oakemu_rl.cli.main import main
from oakemu_rl.experiments import EXPERIMENTS, evaluate_checkpoint, find_checkpoint
from oakemu_rl.visual.curves import plot_runs
from oakemu_rl.visual.video import record_checkpoint
from test_experiment import cartpole, quiet

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cartpole_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two seeds of one configuration and one run of another, with TensorBoard events."""
    root = tmp_path_factory.mktemp("curves")
    runs = []
    for name, seed, steps in (("a0", 0, 2048), ("a1", 1, 2048), ("b", 0, 1536)):
        config = cartpole("ppo", seed=seed, total_steps=steps, logging={"tensorboard": True})
        quiet(config, root / name).run()
        runs.append(root / name)
    return runs


def test_plot_draws_runs_of_different_seeds_as_one_band(
    cartpole_runs: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "curves.png"
    groups = plot_runs(cartpole_runs, out, "CartPole")
    assert [len(g.runs) for g in groups] == [2, 1]
    assert groups[0].label.endswith("2 seeds") and "(a0)" in groups[0].label
    with Image.open(out) as image:
        assert image.format == "PNG" and image.size == (1680, 700)
        colours = image.convert("RGB").getcolors(maxcolors=100_000)
        assert colours is not None and len(colours) > 20  # curves, not a blank canvas


def test_plot_through_the_cli_names_a_run_without_events(
    cartpole_runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "c.svg"
    assert main(["plot", *map(str, cartpole_runs), "--out", str(out)]) == 0
    assert out.read_text().startswith("<?xml")
    quiet(cartpole("ppo", total_steps=512), tmp_path / "no-tb").run()
    assert main(["plot", str(tmp_path / "no-tb"), "--out", str(out)]) == 2
    assert "no-tb: no TensorBoard events" in capsys.readouterr().err


@pytest.fixture(scope="module")
def catch_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("video") / "run"
    data: dict[str, Any] = {
        "algo": "dqn",
        "game": "catch",
        "total_steps": 256,
        "torch_threads": 1,
        "env": {"num_envs": 2, "backend": "inline"},
        "learner": {"learning_starts": 64, "batch_size": 16},
        "tester": {"enabled": False, "max_episode_steps": 40},
        "logging": {"console": False, "tensorboard": False},
    }
    quiet(EXPERIMENTS["dqn"].config_type.from_dict(data), run_dir).run()
    return run_dir


def test_a_video_is_the_same_for_a_seed_and_shows_evaluates_episodes(
    catch_run: Path, tmp_path: Path
) -> None:
    first = record_checkpoint(catch_run, tmp_path / "a.gif", episodes=2, seed=4)
    again = record_checkpoint(catch_run, tmp_path / "b.gif", episodes=2, seed=4)
    other = record_checkpoint(catch_run, tmp_path / "c.gif", episodes=1, seed=5, scale=1)
    assert first.frame_hashes() == again.frame_hashes()
    assert first.frame_hashes()[:5] != other.frame_hashes()[:5]
    evaluated = evaluate_checkpoint(
        find_checkpoint(catch_run), 2, seed=4, num_envs=1, backend="inline"
    )
    assert first.returns == evaluated.returns
    # One frame per step and one per reset; the screen with its border, scaled, and a
    # status line under it.
    assert len(first.frames) == round(2 * evaluated.mean_length) + 2
    with Image.open(tmp_path / "a.gif") as gif:
        assert gif.n_frames == len(first.frames)
        assert gif.size == (2 * 320, 2 * (256 + 12))
        assert gif.info["duration"] == 80  # 4 frames a step at 50 frames/s
    with Image.open(tmp_path / "c.gif") as gif:
        assert gif.size == (320, 256 + 12)


def test_evaluate_video_through_the_cli(
    catch_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "v.gif"
    args = ["evaluate", str(catch_run), "--episodes", "1", "--json", "--video", str(out)]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["video"] == str(out) and out.is_file()
    assert main(["evaluate", str(catch_run), "--video", str(tmp_path / "v.avi")]) == 2
    assert "expected a .gif or .mp4" in capsys.readouterr().err


def test_the_tester_writes_a_video_to_tensorboard_when_asked(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    data: dict[str, Any] = {
        "algo": "ppo",
        "game": "catch",
        "total_steps": 256,
        "torch_threads": 1,
        "env": {"num_envs": 2, "backend": "inline"},
        "ppo": {"rollout_steps": 32, "epochs": 1, "minibatches": 2},
        "tester": {
            "every_steps": 128,
            "episodes": 1,
            "num_envs": 1,
            "final_episodes": 1,
            "random_baseline": False,
            "max_episode_steps": 30,
            "video": True,
            "video_steps": 20,
        },
        "logging": {"console": False, "tensorboard": True},
    }
    run_dir = tmp_path / "run"
    quiet(EXPERIMENTS["ppo"].config_type.from_dict(data), run_dir).run()
    events = EventAccumulator(str(run_dir / "tb"), size_guidance={"images": 0})
    events.Reload()
    videos = events.Images("eval/video")
    assert videos and videos[0].step == 128  # the periodic evaluations (the final has none)
    assert all(v.encoded_image_string.startswith(b"GIF8") for v in videos)
    assert (videos[0].width, videos[0].height) == (320, 256 + 12)
    with Image.open(io.BytesIO(videos[0].encoded_image_string)) as gif:
        assert gif.n_frames == 21  # the reset and 20 steps
    # Beside the win rate, the share of games won with no life lost (none in 30 steps).
    clean = events.Scalars("eval/clean_win_rate")
    assert [e.step for e in clean] == [e.step for e in events.Scalars("eval/win_rate")]
    assert clean and all(e.value == 0.0 for e in clean)
