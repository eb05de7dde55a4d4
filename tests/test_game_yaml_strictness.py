"""Game YAML strictness: duplicate keys, comparisons without a reference, non-finite rewards
and addresses written as strings. Every error names the file, the field and what was expected."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from oakemu_rl.games import GameDefinitionError, load_game
from oakemu_rl.games.loader import bundled_games, read_game_yaml

WriteGame = Callable[..., Path]


def _error(path: Path) -> GameDefinitionError:
    with pytest.raises(GameDefinitionError) as info:
        load_game(path)
    error = info.value
    assert error.path == str(path.resolve())
    assert str(path.resolve()) in str(error)
    return error


def _write_text(write_game: WriteGame, text: str) -> Path:
    """The counter game's YAML (so its snapshot sits alongside), replaced by `text`."""
    path = write_game()
    path.write_text(text, encoding="utf-8")
    return path


# -- duplicate keys ----------------------------------------------------------------------

COUNTER_YAML = """\
name: Counter
snapshot: counter.sna
data:
  score: {address: 0x9000, type: byte}
  lives: {address: 0x9004, type: number_string, length: 1}
routines:
  tick: 0x8100
actions: [[], [Q]]
episode:
  win:
    - {variable: score, op: greater-or-equal, reference: 60}
"""


def test_counter_yaml_without_duplicates_loads(write_game: WriteGame) -> None:
    assert load_game(_write_text(write_game, COUNTER_YAML)).spec.routines == {"tick": 0x8100}


DUPLICATES: list[tuple[str, str, str, str]] = [
    # (text to replace, its replacement, field, expected words in the problem)
    ("name: Counter\n", "name: Counter\nname: Other\n", "name",
     "duplicate key 'name' on line 2; first defined on line 1"),
    ("  tick: 0x8100\n", "  tick: 0x8100\n  tick: 0x8200\n", "routines.tick",
     "duplicate key 'tick' on line 8; first defined on line 7"),
    ("  lives: {", "  score: {", "data.score",
     "duplicate key 'score' on line 5; first defined on line 4"),
    ("{address: 0x9000,", "{address: 0x9000, address: 0x9001,", "data.score.address",
     "duplicate key 'address' on line 4, column 28; first defined on column 11 of the same line"),
    ("op: greater-or-equal,", "op: greater-or-equal, op: equal,", "episode.win[0].op",
     "duplicate key 'op' on line 11"),
]  # fmt: skip


@pytest.mark.parametrize("old,new,field,expected", DUPLICATES)
def test_duplicate_key_is_an_error(
    write_game: WriteGame, old: str, new: str, field: str, expected: str
) -> None:
    assert COUNTER_YAML.count(old) == 1
    error = _error(_write_text(write_game, COUNTER_YAML.replace(old, new)))
    assert error.field == field
    assert expected in error.problem
    assert "expected each key once" in error.problem


def test_merge_keys_may_still_be_overridden_but_not_repeated() -> None:
    path = Path("anchors.yaml")
    merged = "base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  a: 5\n"
    assert read_game_yaml(merged, path) == {"base": {"a": 1, "b": 2}, "x": {"a": 5, "b": 2}}
    with pytest.raises(GameDefinitionError) as info:
        read_game_yaml(merged + "  a: 6\n", path)
    assert info.value.field == "x.a"
    assert "duplicate key 'a' on line 5; first defined on line 4" in info.value.problem


def test_keys_equal_as_values_are_duplicates() -> None:
    """`1` and `0x1` are one key once loaded: the second would silently replace the first."""
    with pytest.raises(GameDefinitionError, match=r"anchors\.yaml: m\.0x1: duplicate key 1"):
        read_game_yaml("m:\n  1: a\n  0x1: b\n", Path("anchors.yaml"))


def test_recursive_anchors_and_unhashable_keys_stay_yaml_errors() -> None:
    assert read_game_yaml("a: &a [*a]\n", Path("r.yaml"))["a"][0][0][0] is not None
    with pytest.raises(GameDefinitionError, match=r"r\.yaml: line 1, column 3: invalid YAML"):
        read_game_yaml("? [1]\n: 2\n", Path("r.yaml"))


# -- comparisons need a reference ----------------------------------------------------------

COMPARISONS = ["equal", "not-equal", "less-than", "greater-than", "less-or-equal",
               "greater-or-equal"]  # fmt: skip


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_without_reference_is_an_error(write_game: WriteGame, op: str) -> None:
    path = write_game({"episode": {"loss": [{"variable": "score", "op": op}]}})
    error = _error(path)
    assert error.field == "episode.loss[0]"
    assert f"op '{op}' compares 'score' with 'reference', which is missing" in error.problem
    assert "expected an integer reference" in error.problem


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_with_reference_zero_loads(write_game: WriteGame, op: str) -> None:
    path = write_game({"episode": {"win": [{"variable": "score", "op": op, "reference": 0}]}})
    assert load_game(path).spec.episode.win[0].reference == 0


@pytest.mark.parametrize("op", ["zero", "nonzero", "positive", "negative"])
def test_sign_ops_need_no_reference(write_game: WriteGame, op: str) -> None:
    path = write_game({"episode": {"loss": [{"variable": "lives", "op": op}]}})
    assert load_game(path).spec.episode.loss[0].op == op


# -- rewards are finite ----------------------------------------------------------------------

NON_FINITE: list[tuple[dict[str, Any], str]] = [
    ({"variables": {"score": {"reward": math.inf}}}, "reward.variables.score.reward"),
    ({"variables": {"score": {"penalty": -math.inf}}}, "reward.variables.score.penalty"),
    ({"variables": {"score": {"reward": math.nan}}}, "reward.variables.score.reward"),
    ({"events": {"rare": math.nan}}, "reward.events.rare"),
    ({"events": {"rare": "inf"}}, "reward.events.rare"),
    ({"time": -math.inf}, "reward.time"),
]


@pytest.mark.parametrize("reward,field", NON_FINITE)
def test_non_finite_reward_is_an_error(
    write_game: WriteGame, reward: dict[str, Any], field: str
) -> None:
    error = _error(write_game({"reward": reward}))
    assert error.field == field
    assert "should be a finite number" in error.problem


def test_yaml_inf_and_nan_spellings_are_rejected(write_game: WriteGame) -> None:
    for spelling in (".inf", "-.Inf", ".NaN"):
        text = COUNTER_YAML + f"reward:\n  time: {spelling}\n"
        error = _error(_write_text(write_game, text))
        assert error.field == "reward.time"
        assert "should be a finite number" in error.problem


# -- addresses as strings -------------------------------------------------------------------


def _with_addresses(write_game: WriteGame, score: Any, tick: Any) -> Path:
    spec = {"address": score, "type": "byte"}
    return write_game(
        {"data": {"score": spec, "seed": {"address": 0x9002, "type": "word"},
                  "lives": {"address": 0x9004, "type": "number_string", "length": 1}},
         "routines": {"tick": tick, "rare": 0x8110}}
    )  # fmt: skip


@pytest.mark.parametrize(
    "score,tick", [("0x9000", "0x8100"), ("0X9000", "0x8100"), ("36864", "33024")]
)
def test_quoted_addresses_load_to_the_same_spec_as_ints(
    write_game: WriteGame, score: str, tick: str
) -> None:
    as_ints = load_game(_with_addresses(write_game, 0x9000, 0x8100)).spec
    as_strings = load_game(_with_addresses(write_game, score, tick)).spec
    assert as_strings == as_ints
    assert as_strings.data["score"].address == 0x9000 and as_strings.routines["tick"] == 0x8100


def test_quoted_hex_in_the_yaml_text_loads(write_game: WriteGame) -> None:
    quoted = COUNTER_YAML.replace("0x9000", "'0x9000'").replace("0x8100", '"0x8100"')
    assert quoted.count("'0x9000'") == 1 and quoted.count('"0x8100"') == 1
    as_ints = load_game(_write_text(write_game, COUNTER_YAML)).spec
    assert load_game(_write_text(write_game, quoted)).spec == as_ints


BAD_ADDRESSES: list[tuple[Any, str]] = [
    ("$8009", "expected a valid integer address"),
    ("#8009", "expected a valid integer address"),
    ("8009h", "expected a valid integer address"),
    ("0x", "expected a valid integer address"),
    ("0xG1", "expected a valid integer address"),
    (" 0x8009", "expected a valid integer address"),
    ("-1", "expected a valid integer address"),
    ("1e3", "expected a valid integer address"),
    ("", "expected a valid integer address"),
    (True, "expected a valid integer address"),
    (8009.0, "expected a valid integer address"),
    (None, "expected a valid integer address"),
]


@pytest.mark.parametrize("address,expected", BAD_ADDRESSES)
def test_bad_data_address_is_an_error(write_game: WriteGame, address: Any, expected: str) -> None:
    error = _error(write_game({"data": {"score": {"address": address, "type": "byte"}}}))
    assert error.field == "data.score.address"
    assert expected in error.problem
    assert "'0x8009'" in error.problem and f"got {address!r}" in error.problem


@pytest.mark.parametrize("address", ["$8100", "start", False])
def test_bad_routine_address_is_an_error(write_game: WriteGame, address: Any) -> None:
    error = _error(write_game({"routines": {"tick": address, "rare": 0x8110}}))
    assert error.field == "routines.tick"
    assert "expected a valid integer address" in error.problem
    assert f"got {address!r}" in error.problem


@pytest.mark.parametrize("address", ["0x10000", "65536", "0" * 3 + "9" * 6, "9" * 5000])
def test_string_addresses_are_range_checked(write_game: WriteGame, address: str) -> None:
    error = _error(write_game({"data": {"score": {"address": address, "type": "byte"}}}))
    assert error.field == "data.score.address"
    assert "out of range; expected 0x0000-0xFFFF" in error.problem
    error = _error(write_game({"routines": {"tick": address, "rare": 0x8110}}))
    assert error.field in ("routines", "routines.tick")  # as for ints: the mapping is named
    assert "out of range; expected 0x0000-0xFFFF" in error.problem


def test_string_address_still_checks_the_variable_end(write_game: WriteGame) -> None:
    error = _error(write_game({"data": {"score": {"address": "0xFFFF", "type": "word"}}}))
    assert (error.field, "passes 0xFFFF" in error.problem) == ("data.score", True)


# -- bundled games ----------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(bundled_games()))
def test_every_bundled_game_still_loads(key: str) -> None:
    game = load_game(key)
    # and the strict loader reads the same data as PyYAML's own SafeLoader
    text = game.path.read_text(encoding="utf-8")
    assert read_game_yaml(text, game.path) == yaml.safe_load(text)
