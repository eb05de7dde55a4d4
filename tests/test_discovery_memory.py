"""Screen text and numbers (ROM and RAM fonts), the scripted RAM search and `oakemu-rl memory`."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import yaml

from oakemu_rl.cli.main import main
from oakemu_rl.discovery.memory_search import (
    ENCODINGS,
    ChangedBy,
    Equals,
    EqualsScreen,
    FallsByOne,
    OnlyRises,
    RamRecording,
    RisesWith,
    find_score_and_lives,
    find_variables,
    game_from_snapshot,
    record_ram,
)
from oakemu_rl.discovery.screen_text import (
    UNKNOWN,
    ScreenNumber,
    find_fonts,
    read_numbers,
    read_screen_text,
    rom_font,
)
from oakemu_rl.emulator import ZXSpectrum
from oakemu_rl.games import GameSession, load_game
from oakemu_rl.games.loader import GameDefinition
from oakemu_rl.games.schema import (
    DataVariable,
    EpisodeSpec,
    GameSpec,
    RandomizeStep,
    RewardSpec,
    RunUntilStep,
)
from oakemu_rl.games.variables import DECODERS, encode_value

pytestmark = pytest.mark.filterwarnings("error")

# -- drawing on a bare machine's screen ---------------------------------------------------------


def cell_address(row: int, col: int, line: int) -> int:
    return 0x4000 | ((row & 0x18) << 8) | (line << 8) | ((row & 7) << 5) | col


def draw(
    machine: ZXSpectrum,
    row: int,
    col: int,
    text: str,
    glyphs: npt.NDArray[np.uint8] | None = None,
    first: int = 32,
    attr: int = 0x47,
    inverse: bool = False,
) -> None:
    """Print `text` with a font (default: the ROM's) and attribute, as a game would."""
    font = rom_font().glyphs if glyphs is None else glyphs
    for n, ch in enumerate(text):
        glyph = font[ord(ch) - first]
        for line in range(8):
            byte = int(glyph[line]) ^ (0xFF if inverse else 0)
            machine.write(cell_address(row, col + n, line), [byte])
        machine.write(0x5800 + 32 * row + col + n, [attr])


def bold(glyphs: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """A font of our own: the ROM glyphs made one pixel wider."""
    return np.asarray(glyphs | (glyphs >> 1), dtype=np.uint8)


def blank_machine() -> ZXSpectrum:
    machine = ZXSpectrum("48k")
    machine.write(0x4000, bytes(6144))
    machine.write(0x5800, bytes([0x07]) * 768)
    machine.write(0x5C36, (0x3C00).to_bytes(2, "little"))  # CHARS: the ROM's set
    return machine


def test_rom_text_in_either_colour_way_and_hidden_text() -> None:
    machine = blank_machine()
    draw(machine, 0, 1, "SCORE 01234")
    draw(machine, 0, 20, "HI: 999", attr=0x38, inverse=True)  # black on white, inverse bitmap
    draw(machine, 5, 3, "SECRET 77", attr=0x3F)  # white ink on white paper: nothing shows
    draw(machine, 10, 0, "3 LIVES, 8 SECTORS")
    draw(machine, 12, 0, "LEVEL     4")  # too far from its word
    machine.write(cell_address(20, 4, 0), [0x81])  # a mark no font draws
    lines = read_screen_text(machine)
    assert len(lines) == 24 and all(len(line.text) == 32 for line in lines)
    assert str(lines[0]) == " SCORE 01234        HI: 999"
    assert str(lines[5]) == ""
    assert str(lines[20]) == "    " + UNKNOWN
    numbers = {(n.row, n.col): n for n in read_numbers(machine)}
    assert numbers[(0, 7)] == ScreenNumber(1234, "01234", 0, 7, "SCORE")
    assert numbers[(0, 24)] == ScreenNumber(999, "999", 0, 24, "HI")
    assert numbers[(10, 0)].label is None and numbers[(10, 9)].label is None  # "LIVES," no label
    assert numbers[(12, 10)].label is None
    assert not any(n.row == 5 for n in numbers.values())


def test_a_digit_font_in_ram_is_found_by_the_digits_the_screen_shows() -> None:
    machine = blank_machine()
    digits = bold(rom_font().glyphs[16:26])
    machine.write(0xA003, digits.tobytes())  # not on an 8-byte boundary
    draw(machine, 0, 0, "LIVES")
    assert [f.name for f in find_fonts(machine)] == ["ROM"]  # no digit of it shown yet
    draw(machine, 0, 6, "07", digits, first=48)
    draw(machine, 3, 2, "SCORE")
    draw(machine, 3, 8, "2560", digits, first=48, attr=0x38, inverse=True)
    fonts = find_fonts(machine)
    assert [(f.address, f.first_char, len(f)) for f in fonts[1:]] == [(0xA003, 48, 10)]
    numbers = [(n.label, n.value, n.text) for n in read_numbers(machine)]
    assert numbers == [("LIVES", 7, "07"), ("SCORE", 2560, "2560")]
    assert [(n.label, n.value) for n in read_numbers(machine, fonts[:1])] == []


def test_whole_character_sets_in_ram_by_chars_or_by_what_the_screen_shows() -> None:
    font = bold(rom_font().glyphs)
    machine = blank_machine()
    machine.write(0xB000, font.tobytes())
    machine.write(0x5C36, (0xB000 - 256).to_bytes(2, "little"))
    draw(machine, 23, 0, "TIME 0815", font)
    fonts = find_fonts(machine)
    assert [(f.address, f.first_char, len(f)) for f in fonts[1:]] == [(0xB000, 32, 96)]
    assert fonts[1].name.endswith("(CHARS)")
    assert [(n.label, n.value) for n in read_numbers(machine)] == [("TIME", 815)]

    machine = blank_machine()  # CHARS at the ROM: found through the screen instead
    machine.write(0xC001, font.tobytes())
    draw(machine, 2, 0, "ZONE 42", font)
    fonts = find_fonts(machine)
    assert [(f.address, f.first_char, len(f)) for f in fonts[1:]] == [(0xC001, 32, 96)]
    assert str(read_screen_text(machine, fonts)[2]) == "ZONE 42"


@pytest.mark.parametrize("key", ["catch", "forest_run"])
def test_screen_number_reading_is_exact_on_the_bundled_games_huds_over_100_random_frames(
    key: str,
) -> None:
    game = load_game(key)
    session = GameSession(game)
    rng = np.random.default_rng(7)
    session.reset(seed=7)
    checked = set(rng.choice(400, size=100, replace=False).tolist())
    seen = 0
    for step in range(400):
        result = session.step(int(rng.integers(game.num_actions)))
        if step in checked:
            fonts = find_fonts(session.machine)
            assert [f.name for f in fonts] == ["ROM"]  # both print with the ROM set
            shown = {n.label: n for n in read_numbers(session.machine, fonts)}
            values = session.values
            assert shown["SCORE"].value == values["score"]
            assert shown["LIVES"].value == values["lives"]
            assert len(shown["SCORE"].text) == game.spec.data["score"].size  # leading zeros
            seen += 1
        if result.outcome is not None:
            session.reset(seed=step)
    assert seen == 100


# -- the search on a small synthetic recording --------------------------------------------------

BASE = 0x8000
ROWS = 12
STARTS = [0, 6]  # two episodes of 6 rows


def synthetic(screen: bool = False) -> RamRecording:
    """RAM of 64 bytes from 0x8000 over two episodes: lives, a score and some distractors."""
    ram = np.zeros((ROWS, 64), dtype=np.uint8)
    lives = [3, 3, 2, 2, 2, 1, 3, 3, 3, 2, 2, 2]  # fell by one into rows 2, 5, 9
    score = [0, 1, 1, 2, 5, 5, 0, 0, 3, 3, 4, 7]
    ram[:, 0x00] = lives
    ram[:, 0x01] = 3  # equals 3 throughout
    ram[:, 0x02] = [3, 2, 1, 0, 5, 4, 3, 2, 1, 0, 5, 4]  # falls by one almost every step
    for row, value in enumerate(score):
        ram[row, 0x10:0x14] = np.frombuffer(encode_value("number_string", value, 4), np.uint8)
    ram[:, 0x20] = np.arange(ROWS) * 3 + 7  # a frame counter: rises every step
    ram[:, 0x21] = [0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 2]  # rises with the score, not always
    starts = np.zeros(ROWS, dtype=bool)
    starts[STARTS] = True
    shown = None
    if screen:
        shown = [
            (ScreenNumber(v, f"{v:04d}", 0, 6, "SCORE"), ScreenNumber(n, str(n), 0, 30, "LIVES:"))
            for v, n in zip(score, lives, strict=True)
        ]
        shown[3] = ()  # a step where the HUD was hidden
    return RamRecording(ram, BASE, starts, np.zeros(ROWS, np.int16), [()] * ROWS, shown, "test")


def places(found: list[Any]) -> list[tuple[int, str, int]]:
    return [(c.address, c.type, c.length) for c in found]


def test_equals_keeps_the_values_at_one_step() -> None:
    recording = synthetic()
    found = find_variables(recording, [Equals(3, 0), Equals(1, 5)], types=["byte"])
    assert places(found) == [(0x8000, "byte", 1)]
    found = find_variables(recording, [Equals(3, 0)], types=["byte"], limit=100)
    assert {c.address for c in found} == {0x8000, 0x8001, 0x8002}
    assert all(c.values[0] == 3 for c in found) and found[0].address == 0x8000  # a tie
    last = find_variables(recording, [Equals(2, -1)], types=["byte"])
    assert {c.address for c in last} == {0x8000, 0x8021}
    with pytest.raises(ValueError, match=r"step 12 is outside the recording's steps 0\.\.11"):
        find_variables(recording, [Equals(3, 12)])


def test_changed_by_keeps_what_fell_by_one_at_the_event_steps() -> None:
    recording = synthetic()
    found = find_variables(recording, [ChangedBy(-1, [2, 5, 9])], types=["byte"])
    assert places(found)[:2] == [(0x8000, "byte", 1), (0x8002, "byte", 1)]
    assert found[0].score > 2 * found[1].score  # 0x8002 also changes elsewhere
    only = find_variables(recording, [ChangedBy(-1, [2, 5, 9], only_then=True)], types=["byte"])
    assert places(only) == [(0x8000, "byte", 1)]
    assert only[0].score == pytest.approx(1.0)
    assert find_variables(recording, [ChangedBy(-1, [2, 4])], types=["byte"]) == []
    with pytest.raises(ValueError, match="step 6 starts an episode"):
        find_variables(recording, [ChangedBy(-1, [6])])


def test_rises_with_follows_a_reference_series() -> None:
    recording = synthetic()
    score = recording.decode(0x8010, "number_string", 4)
    found = find_variables(recording, [RisesWith(score, "score")])
    assert places(found)[0] == (0x8010, "number_string", 4)
    assert (0x8020, "byte", 1) in places(found)  # the frame counter rises too, but always
    assert (0x8021, "byte", 1) not in places(found)  # did not rise at every score rise
    counter = next(c for c in found if c.address == 0x8020)
    assert counter.score < 0.7 * found[0].score
    only = find_variables(recording, [RisesWith(score, "score", only_then=True)])
    assert {c.address for c in only} == {0x8010, 0x8011, 0x8012, 0x8013}
    half = find_variables(recording, [RisesWith(score, "score", min_fraction=0.5)], limit=50)
    assert (0x8021, "byte", 1) in places(half)
    with pytest.raises(ValueError, match="one reference value per recorded step"):
        find_variables(recording, [RisesWith([1, 2, 3])])
    with pytest.raises(ValueError, match="never rose"):
        find_variables(recording, [RisesWith(np.zeros(ROWS, np.int64), "flat")])


def test_equals_screen_matches_the_labelled_number_and_its_text() -> None:
    recording = synthetic(screen=True)
    found = find_variables(recording, [EqualsScreen("score")])
    assert places(found)[0] == (0x8010, "number_string", 4)  # its digits are the text shown
    assert {(0x8011, "number_string", 3), (0x8013, "number_string", 1)} <= set(places(found))
    assert found[0].score == pytest.approx(1.0) and found[1].score < 0.5
    lives = find_variables(recording, [EqualsScreen("LIVES")])  # "LIVES:" on screen
    assert places(lives)[0] == (0x8000, "byte", 1)
    with pytest.raises(ValueError, match="labels seen: LIVES, SCORE"):
        find_variables(recording, [EqualsScreen("HI")])
    with pytest.raises(ValueError, match="holds no screen numbers"):
        find_variables(synthetic(), [EqualsScreen("SCORE")])


def test_score_and_lives_heuristics() -> None:
    recording = synthetic()
    score = find_variables(recording, [OnlyRises()])
    assert places(score)[0] == (0x8010, "number_string", 4)
    counter = next(c for c in score if c.address == 0x8020)  # rises, but starts at 7
    assert counter.score < 0.5 * score[0].score
    lives = find_variables(recording, [FallsByOne()])
    assert places(lives)[0] == (0x8000, "byte", 1)
    assert places(find_variables(recording, [FallsByOne(at=[2, 5, 9])])) == [(0x8000, "byte", 1)]
    assert find_variables(recording, [FallsByOne(at=[2, 5])]) == []
    found = find_score_and_lives(recording=recording, screen=False)
    assert found.best_lives is not None and found.best_lives.address == 0x8000
    with pytest.raises(ValueError, match="at least one constraint"):
        find_variables(recording, [])


@pytest.mark.parametrize(("kind", "length"), ENCODINGS)
def test_every_encoding_is_tried_at_every_address(kind: str, length: int) -> None:
    # Values that use every byte of the encoding, so that no shorter reading is the same.
    top = {"byte": 250, "signed_byte": 100, "word": 60000, "word_be": 60000}.get(kind)
    digits = 2 * length if kind == "bcd" else length
    top = top or 10**digits - 1
    values = np.linspace(top // 2, top, ROWS).astype(np.int64)
    if kind == "signed_byte":
        values -= 110
    ram = np.full((ROWS, 32), 0xFF, dtype=np.uint8)
    for row, value in enumerate(values.tolist()):
        raw = encode_value(kind, value, length)
        ram[row, 9 : 9 + len(raw)] = np.frombuffer(raw, np.uint8)
    starts = np.zeros(ROWS, dtype=bool)
    recording = RamRecording(ram, 0x9000, starts, np.zeros(ROWS, np.int16), [()] * ROWS)
    found = find_variables(recording, [Equals(int(values[0]), 0), RisesWith(values, "it")])
    assert places(found)[0] == (0x9009, kind, length)
    entry = yaml.safe_load(found[0].yaml_entry("it"))["it"]
    variable = DataVariable.model_validate(entry)
    assert variable == found[0].variable
    raw_row = ram[5, 9 : 9 + variable.size].tobytes()
    assert DECODERS[variable.type](raw_row) == values[5]


# -- the bundled games, searched without their data: sections -----------------------------------


def blind(key: str) -> tuple[GameDefinition, GameSpec]:
    """The game with only its snapshot, start and actions (and what the start needs)."""
    game = load_game(key)
    spec = game.spec
    drawn = {n for s in spec.start if isinstance(s, RandomizeStep) for n in s.randomize}
    needed = {s.run_until for s in spec.start if isinstance(s, RunUntilStep)}
    stripped = spec.model_copy(
        update={
            "data": {k: v for k, v in spec.data.items() if k in drawn},
            "routines": {k: v for k, v in spec.routines.items() if k in needed},
            "reward": RewardSpec(),
            "episode": EpisodeSpec(),
        }
    )
    assert "score" not in stripped.data and "lives" not in stripped.data
    return GameDefinition(stripped, game.path), spec


@pytest.mark.parametrize("key", ["catch", "forest_run"])
@pytest.mark.parametrize("screen", [True, False], ids=["screen-labels", "no-screen"])
def test_the_search_recovers_the_bundled_games_score_and_lives(key: str, screen: bool) -> None:
    game, spec = blind(key)
    found = find_score_and_lives(game, steps=500, seed=3, screen=screen)
    assert ("labelled SCORE" in found.score_route) == screen
    assert ("labelled LIVES" in found.lives_route) == screen
    for name, best in (("score", found.best_score), ("lives", found.best_lives)):
        assert best is not None
        assert best.variable == spec.data[name], f"{name}: {best.description}"
        assert 0 < best.score <= 1
    if screen:
        assert found.best_score is not None and found.best_score.score == pytest.approx(1.0)
    # The entries, pasted into the game's YAML, make a valid game with the same variables.
    data = yaml.safe_load(game.path.read_text(encoding="utf-8"))
    entries = [
        c.yaml_entry(n) for n, c in (("score", found.best_score), ("lives", found.best_lives)) if c
    ]
    data["data"] = {**data["data"], **yaml.safe_load("\n".join(entries))}
    assert GameSpec.model_validate(data).data["score"] == spec.data["score"]


def test_lives_fall_at_the_routine_that_loses_one() -> None:
    game = load_game("catch")  # routines kept: 'miss' marks the lost lives
    found = find_score_and_lives(game, steps=400, seed=1, screen=False, life_events=["miss"])
    assert "at miss" in found.lives_route
    assert found.best_lives is not None and found.best_lives.variable == game.spec.data["lives"]
    recording = found.recording
    misses = recording.steps_with_events(["miss"])
    assert misses and all(recording.events[row] for row in misses)


def test_record_ram_policies_and_a_bare_snapshot() -> None:
    game = load_game("catch")
    actions = [1, 1, 2, 0, 2, 2, 1]
    recording = record_ram(game, steps=50, policy=actions, seed=4)
    assert recording.rows == len(actions) + 1 and recording.episodes == 1
    assert recording.actions.tolist() == [-1, *actions]
    assert recording.base == 0x5B00 and recording.ram.shape == (8, 0x10000 - 0x5B00)
    again = record_ram(game, steps=50, policy=actions, seed=4)
    assert np.array_equal(again.ram, recording.ram)  # the same seed and actions, the same RAM
    # A trajectory starts where it was recorded from, whatever the seed of the search.
    trajectory = SimpleNamespace(actions=np.array(actions), start_seed=9, start_state=None)
    first = record_ram(game, steps=50, policy=trajectory, seed=1)
    assert np.array_equal(first.ram, record_ram(game, steps=50, policy=trajectory, seed=2).ram)
    assert not np.array_equal(first.ram, recording.ram)

    chosen: list[int] = []

    def policy(step: int, session: GameSession) -> int:
        chosen.append(step)
        return 2

    record_ram(game, steps=5, policy=policy, screen_memory=True)
    assert chosen == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="policy 'greedy'"):
        record_ram(game, steps=5, policy="greedy")
    with pytest.raises(ValueError, match="action 3 is outside"):
        record_ram(game, steps=5, policy=[0, 3])

    bare = game_from_snapshot(game.snapshot_path, start_keys=["SPACE"], actions=[[], ["O"], ["P"]])
    recording = record_ram(bare, steps=30, screen=True)
    assert recording.screen is not None
    assert {"SCORE", "LIVES"} <= set(recording.screen_labels())
    values, present, texts = recording.screen_series("lives")
    assert present.all() and values[0] == 5 and texts[0] == "5"


# -- the command ---------------------------------------------------------------------------------


def test_memory_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["memory", "catch", "--steps", "300", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["game"] == "Catch" and out["steps"] == 300
    first = out["results"]["score"]["candidates"][0]
    assert first["yaml"] == "score: {address: 0x8002, type: number_string, length: 4}"
    assert out["results"]["lives"]["candidates"][0]["address"] == 0x8006

    args = ["memory", "catch", "--steps", "300", "--equals", "5@start", "--screen", "LIVES"]
    assert main([*args, "--name", "lives", "--top", "1"]) == 0
    text = capsys.readouterr().out
    assert "lives: {address: 0x8006, type: number_string, length: 1}" in text

    assert main(["memory", "catch", "--steps", "50", "--equals", "5@x"]) == 2
    assert "--equals 5@x: step 'x' is not a whole number" in capsys.readouterr().err
    assert main(["memory", "catch", "--steps", "50", "--rises-with", "BONUS"]) == 2
    assert "not a data: variable of the game" in capsys.readouterr().err
