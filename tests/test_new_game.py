"""`oakemu-rl new-game`: a game YAML drafted from a snapshot alone.

Each bundled game's snapshot is copied to a folder of its own, away from its YAML, and
drafted; only then is the bundled YAML read, to compare. A drafted game plays as the
bundled one does (same scores, lives, rewarded steps and endings for the same seeds and
actions), so what tests/test_dqn_learning.py shows of the bundled catch holds for it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from oakemu_rl.cli.main import main
from oakemu_rl.emulator import save_snapshot
from oakemu_rl.games.loader import BUNDLED_DIR, load_game
from oakemu_rl.games.session import GameSession
from z80_programs import counter_with_routine, snapshot_48k

GAMES = ("catch", "forest_run")
CRASH_NAME = {"catch": "miss", "forest_run": "crash"}


@pytest.fixture(scope="module")
def drafts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each bundled game drafted by the command from a copy of its snapshot."""
    drafted = {}
    for game in GAMES:
        folder = tmp_path_factory.mktemp(game)
        shutil.copy(BUNDLED_DIR / game / f"{game}.sna", folder / f"{game}.sna")
        out = folder / "drafted.yaml"
        assert main(["new-game", str(folder / f"{game}.sna"), "--out", str(out)]) == 0
        drafted[game] = out
    return drafted


@pytest.mark.parametrize("game", GAMES)
def test_new_game_recovers_the_bundled_definition(game: str, drafts: dict[str, Path]) -> None:
    drafted = load_game(drafts[game]).spec
    real = load_game(game).spec
    # score and lives: address, type and length
    for name in ("score", "lives"):
        assert drafted.data[name] == real.data[name], name
    # the main loop, the crash (catch: miss) and game-over routines, to the byte
    assert drafted.routines == {
        "main_loop": real.routines["main_loop"],
        "crash": real.routines[CRASH_NAME[game]],
        "game_over": real.routines["game_over"],
    }
    # the action keys, and the actions they make, in the YAML's order
    assert drafted.actions == real.actions
    # the random-number state, the HUD row left out of the play area
    assert drafted.data["rng_seed"] == real.data["rng_seed"]
    assert drafted.play_area == real.play_area
    start = yaml.safe_load(drafts[game].read_text())["start"]
    assert start[0] == {"randomize": ["rng_seed"]}
    assert start[2] == {"press": ["SPACE"], "frames": 2}
    assert start[3]["run_until"] == "main_loop"
    assert (
        drafted.episode.loss[0].variable == "lives" and drafted.episode.loss[1].event == "game_over"
    )
    assert drafted.reward.variables["lives"].penalty >= 1.0


@pytest.mark.parametrize("game", GAMES)
def test_every_guess_carries_a_confidence(game: str, drafts: dict[str, Path]) -> None:
    text = drafts[game].read_text()
    lines = text.splitlines()
    assert lines[0].startswith("# Drafted by `oakemu-rl new-game`")
    assert "# Still to check by hand:" in text and "a win condition" in text
    guesses = [
        line
        for line in lines
        if line.startswith(("  score:", "  lives:", "  rng_seed:", "  main_loop:", "  crash:"))
        or line.startswith(("  game_over:", "  - press:", "  - randomize:"))
    ]
    assert len(guesses) == 8
    for line in guesses:
        confidence = float(line.split("# confidence ")[1].split(":")[0])
        assert 0.5 <= confidence <= 1.0, line


@pytest.mark.parametrize("game", GAMES)
def test_the_drafted_game_loads_inspects_and_plays(
    game: str, drafts: dict[str, Path], tmp_path: Path
) -> None:
    shots = tmp_path / "shots"
    assert main(["inspect", str(drafts[game]), "--steps", "100", "--out", str(shots)]) == 0
    assert (shots / "drafted_screen.png").is_file()
    # random play ends in a loss once the lives are gone, as with the bundled YAML
    session = GameSession(load_game(drafts[game]))
    session.reset(seed=5)
    rng = np.random.default_rng(5)
    lives = session.values["lives"]
    outcome = None
    for _ in range(3000):
        step = session.step(int(rng.integers(len(session.game.spec.actions))))
        if step.outcome is not None:
            outcome = step.outcome
            break
    assert outcome == "loss" and lives > 0 and step.values["lives"] == 0


def test_new_game_refuses_bad_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "still.sna"
    save_snapshot(snapshot_48k(counter_with_routine()), snapshot)
    existing = tmp_path / "game.yaml"
    existing.write_text("keep me")
    assert main(["new-game", str(snapshot), "--out", str(existing)]) == 2
    assert "give --force" in capsys.readouterr().err
    assert existing.read_text() == "keep me"
    assert main(["new-game", str(snapshot), "--out", str(tmp_path / "game.txt")]) == 2
    assert "expected a .yaml file" in capsys.readouterr().err
    # a program that no key starts
    assert main(["new-game", str(snapshot), "--out", str(tmp_path / "new.yaml")]) == 2
    assert "none of the keys" in capsys.readouterr().err
    assert not (tmp_path / "new.yaml").exists()


@pytest.mark.parametrize("game", GAMES)
def test_the_drafted_game_plays_as_the_bundled_one(game: str, drafts: dict[str, Path]) -> None:
    bundled, drafted = GameSession(load_game(game)), GameSession(load_game(drafts[game]))
    rng = np.random.default_rng(3)
    endings = 0
    for seed in (1, 2):
        bundled.reset(seed=seed)
        drafted.reset(seed=seed)
        for _ in range(1500):
            action = int(rng.integers(bundled.game.num_actions))
            ours, theirs = bundled.step(action), drafted.step(action)
            for name in ("score", "lives"):
                assert ours.values[name] == theirs.values[name], name
            assert (ours.reward > 0) == (theirs.reward > 0)
            assert (ours.reward < 0) == (theirs.reward < 0)
            assert ours.outcome == theirs.outcome
            if ours.outcome:
                endings += 1
                break
    assert endings == 2  # random play ends both episodes: the endings were compared
