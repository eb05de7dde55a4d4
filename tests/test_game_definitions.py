"""Game YAML validation: every error names the file, the field and what was expected."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from oakemu_rl.emulator import ZXSpectrum, save_snapshot
from oakemu_rl.games import GameDefinitionError, GameSession, StartProcedureError, load_game
from oakemu_rl.games.loader import file_sha256
from oakemu_rl.games.variables import DECODERS, encode_value

WriteGame = Callable[..., Path]


def test_valid_game_loads(write_game: WriteGame) -> None:
    game = load_game(write_game())
    assert game.name == "Counter" and game.num_actions == 3
    assert game.spec.actions[2] == ["KEMPSTON_FIRE"]


def test_yaml_digest_follows_the_bytes(write_game: WriteGame, tmp_path: Path) -> None:
    """Trajectories, references and exported policies are tied to `yaml_sha256`: an edit
    to the YAML, even of a comment, gives another digest."""
    path = write_game()
    before = load_game(path).yaml_sha256
    assert before == hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_text(path.read_text() + "# edited\n")
    assert load_game(path).yaml_sha256 != before
    big = tmp_path / "big.bin"  # read in chunks: a file of several
    big.write_bytes(bytes(range(256)) * 9000)
    assert file_sha256(big) == hashlib.sha256(big.read_bytes()).hexdigest()


BAD_FIELDS: list[tuple[dict[str, Any], str, str]] = [
    ({"colour": "red"}, "", "unknown key 'colour'"),
    ({"machine": "plus3"}, "machine", "'48k' or '128k'"),
    ({"frame_skip": "four"}, "frame_skip", "valid integer"),
    ({"frame_skip": 0}, "frame_skip", "greater than or equal to 1"),
    ({"snapshot": None}, "snapshot", "required"),
    ({"actions": None}, "actions", "required"),
    ({"actions": []}, "actions", "at least 1"),
    ({"actions": [[], ["QQ"]]}, "actions[1][0]", "unknown key name 'QQ'"),
    ({"actions": [["Q"], ["q"]]}, "actions[1]", "repeats action 0"),
    ({"play_area": {"x": 200, "width": 100}}, "play_area", "leaves the 256x192 screen"),
    ({"play_area": {"left": 0}}, "play_area", "unknown key 'left'"),
    ({"data": {"score": {"address": 0x10000, "type": "byte"}}}, "data.score.address", "0x0000-0xFFFF"),
    ({"data": {"score": {"address": 0xFFFF, "type": "word"}}}, "data.score", "passes 0xFFFF"),
    ({"data": {"score": {"address": 1, "type": "float"}}}, "data.score.type", "'byte'"),
    ({"data": {"score": {"address": 1, "type": "byte", "length": 3}}}, "data.score", "1 byte"),
    ({"data": {"score": {"address": 1, "type": "byte", "bits": 3}}}, "data.score", "unknown key 'bits'"),
    ({"data": {"score": {"type": "byte"}}}, "data.score.address", "required"),
    ({"routines": {"tick": 0x12345}}, "routines", "out of range"),
    ({"routines": {"tick": "start"}}, "routines.tick", "valid integer"),
    ({"start": [{"wait": 1, "press": ["Q"]}]}, "start", "exactly one of"),
    ({"start": [{"jump": 1}]}, "start", "exactly one of"),
    ({"start": [{"press": ["NOKEY"]}]}, "start", "unknown key name 'NOKEY'"),
    ({"start": [{"wait": -1}]}, "start", "greater than or equal to 0"),
    ({"start": [{"run_until": "tick", "timeout": 5}]}, "start", "unknown key 'timeout'"),
    ({"start": [{"randomize": ["nothing"]}]}, "start[0].randomize", "'nothing' is not defined in data"),
    ({"start": [{"run_until": "nowhere"}]}, "start[0].run_until", "'nowhere' is not defined in routines"),
    ({"reward": {"variables": {"lives2": {"reward": 1}}}}, "reward.variables.lives2", "not defined"),
    ({"reward": {"events": {"boom": 1}}}, "reward.events.boom", "routine 'boom' is not defined"),
    ({"reward": {"variables": {"score": {"bonus": 1}}}}, "reward.variables.score", "unknown key 'bonus'"),
    ({"episode": {"win": [{"variable": "score", "op": "bigger"}]}}, "episode.win[0].op", "'zero'"),
    ({"episode": {"win": [{"variable": "score"}]}}, "episode.win[0]", "needs an 'op'"),
    ({"episode": {"loss": [{"op": "zero"}]}}, "episode.loss[0]", "exactly one of 'variable' or 'event'"),
    ({"episode": {"loss": [{"event": "boom"}]}}, "episode.loss[0].event", "'boom' is not defined"),
    ({"episode": {"loss": [{"variable": "hp", "op": "zero"}]}}, "episode.loss[0].variable", "'hp'"),
    ({"episode": {"draw": []}}, "episode", "unknown key 'draw'"),
]  # fmt: skip


@pytest.mark.parametrize("override,field,expected", BAD_FIELDS)
def test_bad_field_is_named(
    write_game: WriteGame, override: dict[str, Any], field: str, expected: str
) -> None:
    path = write_game(override)
    with pytest.raises(GameDefinitionError) as info:
        load_game(path)
    error = info.value
    assert error.path == str(path.resolve())
    assert error.field == field
    assert expected in error.problem
    assert str(path.resolve()) in str(error)


def test_missing_snapshot_file(write_game: WriteGame) -> None:
    with pytest.raises(GameDefinitionError, match=r"snapshot: file not found .*gone\.z80"):
        load_game(write_game({"snapshot": "gone.z80"}))


def test_snapshot_of_unknown_format(write_game: WriteGame) -> None:
    with pytest.raises(GameDefinitionError, match=r"snapshot: unknown snapshot format '\.dsk'"):
        load_game(write_game({"snapshot": "game.dsk"}))


def test_snapshot_of_the_wrong_machine(write_game: WriteGame, tmp_path: Path) -> None:
    save_snapshot(ZXSpectrum("128k").to_snapshot(), tmp_path / "big.z80")
    with pytest.raises(GameDefinitionError, match="is a 128k snapshot but machine is 48k"):
        load_game(write_game({"snapshot": "big.z80"}))


def test_corrupt_snapshot(write_game: WriteGame, tmp_path: Path) -> None:
    (tmp_path / "bad.sna").write_bytes(b"\x00" * 100)
    with pytest.raises(GameDefinitionError, match=r"snapshot: SNA file is truncated"):
        load_game(write_game({"snapshot": "bad.sna"}))


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nactions: [[Q]\nsnapshot: a.sna\n")
    with pytest.raises(
        GameDefinitionError, match=r"broken\.yaml: line \d+, column \d+: invalid YAML"
    ):
        load_game(path)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(GameDefinitionError, match="expected a mapping"):
        load_game(path)


def test_missing_yaml_and_unknown_game_name(tmp_path: Path) -> None:
    with pytest.raises(GameDefinitionError, match="file not found"):
        load_game(tmp_path / "nope.yaml")
    with pytest.raises(GameDefinitionError, match="no bundled game of that name"):
        load_game("no_such_game")


def test_run_until_timeout_names_game_and_routine(write_game: WriteGame) -> None:
    # 0x8120 is never executed by the counter program.
    path = write_game({
        "routines": {"tick": 0x8100, "rare": 0x8110, "never": 0x8120},
        "start": [{"run_until": "never", "timeout_frames": 5}],
    })  # fmt: skip
    session = GameSession(load_game(path))
    with pytest.raises(
        StartProcedureError, match=r"'Counter'.*run_until 'never' \(0x8120\).*5 frames"
    ):
        session.reset(0)


@pytest.mark.parametrize(
    "kind,raw,value",
    [
        ("byte", b"\xfe", 254),
        ("signed_byte", b"\xfe", -2),
        ("word", b"\x34\x12", 0x1234),
        ("word_be", b"\x12\x34", 0x1234),
        ("bcd", b"\x01\x23\x45", 12345),
        ("number_string", b"  042", 42),
        ("number_string", b"001230", 1230),
    ],
)
def test_variable_decoding(kind: str, raw: bytes, value: int) -> None:
    assert DECODERS[kind](raw) == value
    if kind != "number_string" or raw[0] != 0x20:
        assert encode_value(kind, value, len(raw)) == raw
