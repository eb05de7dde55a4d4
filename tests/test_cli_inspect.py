"""`oakemu-rl games` and `oakemu-rl inspect`, run as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from oakemu_rl.cli.main import main

WriteGame = Callable[..., Path]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oakemu_rl.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_games_lists_the_bundled_games() -> None:
    result = run_cli("games")
    assert result.returncode == 0, result.stderr
    assert "catch" in result.stdout and "forest_run" in result.stdout
    assert "Forest Run" in result.stdout


def test_inspect_prints_variables_and_writes_two_pngs(tmp_path: Path) -> None:
    result = run_cli("inspect", "forest_run", "--out", str(tmp_path), "--steps", "10")
    assert result.returncode == 0, result.stderr
    for name in ("score", "lives", "sector", "0x8002", "number_string"):
        assert name in result.stdout
    assert "observation type auto chooses attributes" in " ".join(result.stdout.split())
    screen = Image.open(tmp_path / "forest_run_screen.png")
    observation = Image.open(tmp_path / "forest_run_observation.png")
    assert screen.size == (512, 384)
    # The play-area outline is drawn in magenta on the full screen.
    pixels = np.asarray(screen.convert("RGB")).reshape(-1, 3)
    assert np.any(np.all(pixels == (255, 0, 255), axis=1))
    assert observation.mode == "L" and observation.size[0] == observation.size[1]


def test_inspect_any_yaml_in_colour(write_game: WriteGame, tmp_path: Path) -> None:
    assert main(["inspect", str(write_game()), "--out", str(tmp_path / "o"), "--colour"]) == 0
    assert Image.open(tmp_path / "o" / "counter_observation.png").mode == "RGB"


def test_bad_yaml_is_one_clear_line_not_a_traceback(write_game: WriteGame) -> None:
    path = write_game({"frame_skip": "fast"})
    result = run_cli("inspect", str(path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{path.resolve()}: frame_skip:" in result.stderr
    assert "valid integer" in result.stderr


def test_unknown_game_and_bad_flag(tmp_path: Path) -> None:
    result = run_cli("inspect", "no_such_game")
    assert result.returncode == 2 and "no bundled game of that name" in result.stderr
    result = run_cli("inspect", "catch", "--steps", "-3", "--out", str(tmp_path))
    assert result.returncode == 2 and "argument --steps: must be 0 or more, got -3" in result.stderr
    assert "Traceback" not in result.stderr


def test_start_procedure_timeout_is_reported(write_game: WriteGame) -> None:
    path = write_game({
        "routines": {"tick": 0x8100, "rare": 0x8110, "never": 0x8120},
        "start": [{"run_until": "never", "timeout_frames": 3}],
    })  # fmt: skip
    result = run_cli("inspect", str(path))
    assert result.returncode == 2
    assert "run_until 'never'" in result.stderr and "Traceback" not in result.stderr


def test_inspect_prints_the_return_by_source_and_what_outweighs_the_rest(
    tmp_path: Path,
) -> None:
    # Random play on maze_gems (seed 0): one gem (+1.0), three lives lost (3 x -5.0).
    result = run_cli("inspect", "maze_gems", "--out", str(tmp_path), "--steps", "1000")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "return by source: score +1.0, lives -15.0" in text
    assert (
        "losing lives (-15.0) outweighs everything the reward gives (+1.0) 15 to 1 under "
        "random play: an agent may learn to avoid losing lives before it learns to score"
    ) in text

    # On catch, the same random play scores nearly as much as it loses: no warning.
    result = run_cli("inspect", "catch", "--out", str(tmp_path), "--steps", "1000")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "return by source: score +4.0, lives -5.0" in text and "outweighs" not in text
