"""The bundled games: their snapshots rebuild byte for byte from the assembly
sources, their YAML addresses match the assembler's symbols, and they play."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import yaml

from oakemu_rl.games import build
from oakemu_rl.games.build import BUNDLED_DIR, build_game, find_pasmo, game_folders

GAMES = sorted(f.name for f in BUNDLED_DIR.iterdir() if (f / f"{f.name}.asm").is_file())

needs_pasmo = pytest.mark.skipif(
    find_pasmo() is None,
    reason="pasmo (the Z80 assembler) is not installed: `apt-get install pasmo`",
)


def test_every_bundled_game_has_source_yaml_and_snapshot() -> None:
    assert {"catch", "forest_run"} <= set(GAMES)
    for name in GAMES:
        folder = BUNDLED_DIR / name
        assert (folder / f"{name}.yaml").is_file()
        assert (folder / f"{name}.sna").is_file()


def test_the_shared_helpers_folder_is_no_game() -> None:
    from oakemu_rl.games.loader import bundled_games

    assert (BUNDLED_DIR / "common").is_dir()
    assert any((BUNDLED_DIR / "common").glob("*.asm"))
    assert set(GAMES) == {
        "catch",
        "deep_dive",
        "forest_run",
        "key_hunt",
        "maze_gems",
        "sky_harvest",
        "star_guard",
    }
    assert [f.name for f in game_folders()] == GAMES
    assert sorted(bundled_games()) == GAMES


@needs_pasmo
@pytest.mark.parametrize("name", GAMES)
def test_rebuild_matches_committed_snapshot(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From another current directory: the games INCLUDE "../common/...", which pasmo
    # resolves against its current directory, so the build must run pasmo in the game's.
    monkeypatch.chdir(tmp_path)
    folder = BUNDLED_DIR / name
    rebuilt = build_game(folder, tmp_path)
    assert rebuilt == tmp_path / f"{name}.sna"
    committed = (folder / f"{name}.sna").read_bytes()
    assert rebuilt.read_bytes() == committed, (
        f"{name}.sna is stale: run `python -m oakemu_rl.games.build {name}`"
    )


@needs_pasmo
@pytest.mark.parametrize("name", GAMES)
def test_yaml_addresses_match_symbols(name: str) -> None:
    folder = BUNDLED_DIR / name
    symbols = build.game_symbols(folder)
    spec = yaml.safe_load((folder / f"{name}.yaml").read_text())
    for kind in ("data", "routines"):
        for var, entry in spec[kind].items():
            address = entry["address"] if kind == "data" else entry
            assert var in symbols, f"{name}.yaml {kind}.{var}: no label {var} in {name}.asm"
            assert address == symbols[var], (
                f"{name}.yaml {kind}.{var} is 0x{address:04X}, the label is at 0x{symbols[var]:04X}"
            )


@needs_pasmo
def test_check_mode_passes_and_detects_a_stale_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build.main(["--check"]) == 0
    # A copy of the catch folder with one byte of its snapshot changed (and of the
    # shared helpers it includes).
    shutil.copytree(BUNDLED_DIR / "common", tmp_path / "bundled" / "common")
    copy = tmp_path / "bundled" / "catch"
    copy.mkdir(parents=True)
    for item in (BUNDLED_DIR / "catch").iterdir():
        if item.is_file():
            (copy / item.name).write_bytes(item.read_bytes())
    data = bytearray((copy / "catch.sna").read_bytes())
    data[-1] ^= 0xFF
    (copy / "catch.sna").write_bytes(bytes(data))
    monkeypatch.setattr(build, "BUNDLED_DIR", tmp_path / "bundled")
    assert build.main(["--check", "catch"]) == 1
    assert "differs from a fresh build" in capsys.readouterr().err


def test_missing_pasmo_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(build, "find_pasmo", lambda: None)
    assert build.main(["--check"]) == 2
    assert "apt-get install pasmo" in capsys.readouterr().err


def test_unknown_game_is_named() -> None:
    with pytest.raises(build.BuildError, match="no_such_game"):
        game_folders(["no_such_game"])


# -- the games play (these need only the committed snapshots) ----------------------


def test_catch_tracking_policy_catches_and_random_policy_loses() -> None:
    from oakemu_rl.games import GameSession, load_game

    session = GameSession(load_game("catch"))
    session.reset(seed=1)
    events: list[str] = []
    for _ in range(200):
        values = session.values
        ball, paddle = values["ball_x"], values["paddle_x"]
        action = 1 if ball < paddle + 1 else 2 if ball > paddle + 3 else 0
        step = session.step(action)
        events += step.events
    assert events.count("catch") >= 5
    assert "miss" not in events
    assert session.values["score"] == events.count("catch")

    session.reset(seed=2)
    rng = random.Random(0)
    for _ in range(2000):
        step = session.step(rng.randrange(3))
        if step.outcome:
            break
    assert step.outcome == "loss"
    assert session.values["lives"] == 0


def test_forest_run_random_policy_crashes_until_game_over() -> None:
    from oakemu_rl.games import GameSession, load_game

    session = GameSession(load_game("forest_run"))
    session.reset(seed=3)
    assert session.values["sector"] == 1 and session.values["lives"] == 3
    rng = random.Random(0)
    crashes = 0
    for _ in range(3000):
        step = session.step(rng.randrange(6))
        crashes += "crash" in step.events
        if step.outcome:
            break
    assert step.outcome == "loss"
    assert crashes == 3
    assert session.values["score"] > 0


def test_same_seed_and_actions_give_the_same_game() -> None:
    from oakemu_rl.games import GameSession, load_game

    for name in GAMES:
        session = GameSession(load_game(name))
        memories = []
        for _ in range(2):
            session.reset(seed=7)
            rng = random.Random(5)
            for _ in range(100):
                session.step(rng.randrange(session.game.num_actions))
            memories.append(session.machine.read(0x4000, 0xC000))
        assert memories[0] == memories[1]
