"""`oakemu-rl trajectories`, `replay` and `play`, on trajectories of the bundled game Catch."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from oakemu_rl.cli.main import main
from oakemu_rl.envs.oakemu_env import OakEmuEnv
from oakemu_rl.envs.observation import ObservationConfig
from oakemu_rl.games.loader import bundled_games, file_sha256, load_game
from oakemu_rl.trajectories.human_play import action_for_keys, arrow_keys, play
from oakemu_rl.trajectories.materialise import replay
from oakemu_rl.trajectories.trajectory_file import Trajectory

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
pygame = pytest.importorskip("pygame")

SMALL = ObservationConfig(height=8, width=8, frame_stack=1)
CATCH_SHA = file_sha256(bundled_games()["catch"])


def record_catch(path: Path, seed: int, max_steps: int | None = None) -> Trajectory:
    """Play Catch with seeded random actions (to the end, or `max_steps`) and save it."""
    env = OakEmuEnv("catch", SMALL)
    _, info = env.reset(seed=seed)
    episode_seed, lives = int(info["episode_seed"]), info["lives"]
    rng = np.random.default_rng(seed)
    actions: list[int] = []
    rewards: list[float] = []
    outcome = None
    lives_lost = 0
    while max_steps is None or len(actions) < max_steps:
        action = int(rng.integers(env.num_actions))
        _, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        rewards.append(reward)
        lives_lost += max(0, lives - info["lives"])
        lives = info["lives"]
        if terminated or truncated:
            outcome = info["outcome"]
            break
    trajectory = Trajectory(
        game="Catch",
        game_file="catch",
        game_sha256=CATCH_SHA,
        actions=np.array(actions),
        rewards=np.array(rewards),
        start_seed=episode_seed,
        outcome=outcome,
        episode_return=float(sum(rewards)),
        score=float(info["score"]),
        lives_lost=lives_lost,
        source="run",
    )
    trajectory.save(path)
    return trajectory


def _episode_seed(seed: int) -> int:
    _, info = OakEmuEnv("catch", SMALL).reset(seed=seed)
    return int(info["episode_seed"])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory with two trajectories: a whole episode (a loss) and 40 steps."""
    run = tmp_path_factory.mktemp("run")
    record_catch(run / "trajectories" / "lost.trajectory.json", seed=1)
    record_catch(run / "trajectories" / "short.trajectory.json", seed=2, max_steps=40)
    return run


def test_trajectories_lists_a_run_directory_and_one_file(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trajectories", str(run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "file", "source", "outcome", "return", "score", "length", "lives", "lost", "start",
    ]  # fmt: skip
    lost = Trajectory.load(run_dir / "trajectories" / "lost.trajectory.json")
    assert lines[1].split() == [
        "lost.trajectory.json", "run", "loss", f"{lost.episode_return:g}", f"{lost.score:g}",
        str(lost.length), str(lost.lives_lost), "seed", str(lost.start_seed),
    ]  # fmt: skip
    assert lines[2].split()[:3] == ["short.trajectory.json", "run", "-"]
    assert len(lines) == 3

    assert main(["trajectories", str(run_dir / "trajectories" / "short.trajectory.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].split()[5] == "40"


def test_trajectories_json_fields(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trajectories", str(run_dir / "trajectories"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [Path(r["path"]).name for r in rows] == ["lost.trajectory.json", "short.trajectory.json"]
    short = Trajectory.load(run_dir / "trajectories" / "short.trajectory.json")
    assert rows[1] == {
        "path": str(run_dir / "trajectories" / "short.trajectory.json"),
        "game": "Catch",
        "source": "run",
        "outcome": None,
        "return": short.episode_return,
        "score": short.score,
        "length": 40,
        "lives_lost": short.lives_lost,
        "start": f"seed {short.start_seed}",
    }
    assert rows[0]["outcome"] == "loss" and rows[0]["lives_lost"] == 5


def test_trajectories_with_none_found_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trajectories", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"oakemu-rl trajectories: error: {tmp_path}: no trajectory files (*.trajectory.json) found"
    )
    (tmp_path / "bad.trajectory.json").write_text('{"format": "something else"}')
    assert main(["trajectories", str(tmp_path)]) == 2
    assert "bad.trajectory.json: format is 'something else'" in capsys.readouterr().err


def test_replay_verifies_a_recording(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = run_dir / "trajectories" / "lost.trajectory.json"
    lost = Trajectory.load(path)
    assert main(["replay", str(path)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"replayed {lost.length} steps of catch: loss, return {lost.episode_return:g}, "
        f"score {lost.score:g}; matches the recording"
    )


def test_replay_video_has_a_frame_per_kept_step(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run_dir / "trajectories" / "short.trajectory.json"
    out = tmp_path / "videos" / "short.gif"
    assert main(["replay", str(path), "--video", str(out), "--scale", "1", "--every", "3"]) == 0
    assert "matches the recording" in capsys.readouterr().out
    with Image.open(out) as gif:
        # The start, then steps 3, 6, ..., 39 and the last one, 40.
        assert gif.n_frames == 1 + math.ceil(40 / 3)
        assert gif.size == (256 + 64, 192 + 64 + 12)
        assert gif.info["duration"] == 3 * 80  # frame_skip 4 at 50 frames a second
    assert main(["replay", str(path), "--video", str(out), "--every", "100"]) == 0
    with Image.open(out) as gif:
        assert gif.n_frames == 2 and gif.size == (640, 536)


def test_replay_refuses_another_games_yaml(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run_dir / "trajectories" / "short.trajectory.json"
    other = bundled_games()["forest_run"]
    assert main(["replay", str(path), "--game", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"oakemu-rl replay: error: {path}: recorded with 'Catch' (catch, ")
    assert "a trajectory replays only against the YAML it was recorded with" in err
    assert len(err.strip().splitlines()) == 1


def test_replay_reports_a_tampered_reward_as_a_divergence(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads((run_dir / "trajectories" / "lost.trajectory.json").read_text())
    step = next(i for i, r in enumerate(data["rewards"]) if r != 0)
    data["rewards"][step] += 0.5
    path = tmp_path / "tampered.trajectory.json"
    path.write_text(json.dumps(data))
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: replaying the trajectory diverged at step {step}: reward " in err
    assert "(was it recorded with another version of the game?)" in err


def test_replay_reports_an_outcome_the_replay_does_not_reach(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads((run_dir / "trajectories" / "short.trajectory.json").read_text())
    data["outcome"] = "win"
    path = tmp_path / "claims-a-win.trajectory.json"
    path.write_text(json.dumps(data))
    assert main(["replay", str(path)]) == 2
    assert "the recording ended with outcome win, the replay with none" in capsys.readouterr().err


def test_action_for_keys_prefers_the_exact_set_then_the_largest_subset() -> None:
    forest = [list(a) for a in load_game("forest_run").spec.actions]
    assert forest == [[], ["O"], ["P"], ["SPACE"], ["O", "SPACE"], ["P", "SPACE"]]
    assert action_for_keys(forest, set()) == 0
    assert action_for_keys(forest, {"P", "SPACE"}) == 5
    assert action_for_keys(forest, {"P", "SPACE", "A"}) == 5  # A is not a key of the game
    assert action_for_keys(forest, {"O", "P"}) == 1  # no exact match; the first of the largest
    assert action_for_keys(forest, {"O", "P", "SPACE"}) == 4
    assert action_for_keys([["Q"], ["W"]], {"E"}) == 0  # no no-key action
    assert action_for_keys([["Q"], []], {"E"}) == 1
    assert arrow_keys(forest) == {"LEFT": "O", "RIGHT": "P"}
    assert arrow_keys([["Q"], ["A"], ["KEMPSTON_LEFT"], ["KEMPSTON_RIGHT"], ["O"], ["P"]]) == {
        "LEFT": "KEMPSTON_LEFT", "RIGHT": "KEMPSTON_RIGHT", "UP": "Q", "DOWN": "A",
    }  # fmt: skip


def _key(kind: int, key: int) -> Any:
    return pygame.event.Event(kind, key=key, mod=0, unicode="", scancode=0)


def test_play_records_the_actions_of_scripted_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    down, up = pygame.KEYDOWN, pygame.KEYUP
    # Events arriving before step N: what the keys mean in Catch (actions [], [O], [P]).
    script = {
        5: [_key(down, pygame.K_p)],  # P
        15: [_key(up, pygame.K_p), _key(down, pygame.K_LEFT)],  # the left arrow is O
        25: [_key(down, pygame.K_p)],  # O and P: no exact match, the first of the largest
        35: [_key(up, pygame.K_LEFT), _key(down, pygame.K_a)],  # P (A is not Catch's)
        45: [_key(up, pygame.K_p), _key(up, pygame.K_a)],  # nothing
        50: [_key(down, pygame.K_ESCAPE)],
    }
    expected = [0] * 5 + [2] * 10 + [1] * 10 + [1] * 10 + [2] * 10 + [0] * 5

    def scripted() -> Iterator[list[Any]]:
        step = 0
        while True:
            yield script.get(step, [])
            step += 1

    events = scripted()
    path = tmp_path / "me.trajectory.json"
    result = play("catch", path, seed=4, events=lambda: next(events), realtime=False)
    assert result.stopped and result.path == path

    recorded = Trajectory.load(path)
    assert recorded.actions.tolist() == expected
    assert recorded.source == "play" and recorded.outcome is None
    assert recorded.game_file == "catch" and recorded.game_sha256 == CATCH_SHA
    assert recorded.start_seed == _episode_seed(4)
    assert recorded.episode_return == pytest.approx(float(recorded.rewards.sum()))
    replayed = [s.reward for s in replay(OakEmuEnv("catch", SMALL), recorded)]
    assert replayed == recorded.rewards.tolist()
    assert main(["replay", str(path)]) == 0
    assert "replayed 50 steps of catch: no outcome" in capsys.readouterr().out


def test_play_command_records_held_keys_until_max_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    pygame.display.init()
    pygame.event.post(_key(pygame.KEYDOWN, pygame.K_RIGHT))  # the right arrow is P
    path = tmp_path / "held.trajectory.json"
    assert main(["play", "catch", "--record", str(path), "--max-steps", "12"]) == 0
    recorded = Trajectory.load(path)
    assert recorded.actions.tolist() == [2] * 12
    assert recorded.outcome == "truncated"
    assert capsys.readouterr().out.startswith("recorded 12 steps of Catch: truncated, return ")
    assert main(["replay", str(path)]) == 0

    assert main(["play", "catch", "--record", str(tmp_path / "x.json")]) == 2
    assert "x.json: expected a file name ending in .trajectory.json" in capsys.readouterr().err
