"""`observation: auto`: the choice on each bundled game, the screen crop it makes, and
the settings around it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from oakemu_rl.cli.main import main
from oakemu_rl.envs import OakEmuEnv
from oakemu_rl.envs.observation import (
    ATTRIBUTE_COLOURS,
    ATTRIBUTE_PLANES,
    GRAY_LUT,
    ObservationConfig,
    ScreenRegion,
)
from oakemu_rl.envs.observation_choice import (
    CellSample,
    attribute_agreement,
    choose_observation,
    object_visibility,
)
from oakemu_rl.games.loader import bundled_games, load_game

AUTO = ObservationConfig(type="auto", frame_stack=2)

# What each bundled game draws: blocks or cell glyphs of their own colour (attributes), or
# sprites moving pixel by pixel in one colour, or in the background's colours (screen).
EXPECTED = {
    "catch": "attributes",
    "deep_dive": "attributes",
    "forest_run": "attributes",
    "key_hunt": "attributes",
    "maze_gems": "attributes",
    "star_guard": "screen",
    "sky_harvest": "screen",  # black birds drawn on the sky's attribute
}


def test_every_bundled_game_has_an_expected_choice() -> None:
    assert set(bundled_games()) <= set(EXPECTED)


@pytest.mark.parametrize("game", sorted(set(EXPECTED) & set(bundled_games())))
def test_auto_makes_the_expected_choice_on_each_bundled_game(game: str) -> None:
    definition = load_game(game)
    choice = choose_observation(AUTO, definition)
    assert choice.config.type == EXPECTED[game], choice.describe()
    assert choice.config.frame_stack == 2
    env = OakEmuEnv(definition, AUTO, seed=0)
    obs, _ = env.reset()
    assert env.observation_space.contains(obs)
    area = definition.spec.play_area
    if choice.config.type == "attributes":
        # Two frames of 18 planes each: 8 inks, 8 papers, bright, flash.
        assert choice.config.attribute_encoding == "planes"
        assert obs.shape == (36, (area.height + 7) // 8, (area.width + 7) // 8)
        assert "attribute" in choice.reason
    else:
        # The whole play area, never a part of it that random play happened to reach.
        crop = choice.config.crop
        assert crop is not None
        assert (crop.x, crop.y, crop.width, crop.height) == (
            area.x,
            area.y,
            area.width,
            area.height,
        )
        # An 8x8 cell stays at least 2x2 pixels.
        assert crop.width / choice.config.width <= 4 and crop.height / choice.config.height <= 4
        channels = 2 if choice.config.grayscale else 6
        assert obs.shape == (channels, choice.config.height, choice.config.width)
        assert "pixels" in choice.reason or "background's colours" in choice.reason
    env.close()


def sample(patterns: list[list[int]], attributes: list[list[int]]) -> CellSample:
    """A sample of one row of cells over time: patterns[t][c], attributes[t][c] (each
    pattern id a plain cell of its own colour)."""
    ids = np.array(patterns, dtype=np.int64)
    return CellSample(
        ids[:, None, :],
        np.array(attributes, dtype=np.uint8)[:, None, :],
        looks=np.repeat(np.arange(ids.max() + 1, dtype=np.uint8) % 16, 64).reshape(-1, 8, 8),
    )


def test_agreement_counts_changing_cells_that_look_as_their_attribute_says() -> None:
    # Cell 0 changes between two looks, each with its own attribute; cell 1 never changes.
    by_colour = sample([[1, 5], [2, 5], [1, 5]], [[7, 9], [56, 9], [7, 9]])
    assert attribute_agreement(by_colour) == (1.0, 1)
    # One attribute, three shapes (a sprite moving by pixels in one colour).
    by_pixels = sample([[1, 5], [2, 5], [3, 5], [1, 5]], [[7, 9]] * 4)
    agreement, changing = attribute_agreement(by_pixels)
    assert changing == 1 and agreement == pytest.approx(0.5)
    assert attribute_agreement(sample([[1, 5]] * 3, [[7, 9]] * 3)) == (0.0, 0)


def test_visibility_counts_objects_drawn_on_the_background_attribute() -> None:
    # Pattern 0 is the background (attribute 7); objects 1 and 2 have attributes of their own.
    own = sample([[0, 0], [1, 0], [0, 2], [0, 0]], [[7, 7], [9, 7], [7, 10], [7, 7]])
    assert object_visibility(own) == 1.0
    # Object 3 is drawn on the background's attribute (a black bird on the sky): it is one
    # of three object occurrences, though one of eight changing cell observations.
    hidden = sample([[0, 0], [1, 0], [0, 2], [3, 0]], [[7, 7], [9, 7], [7, 10], [7, 7]])
    assert object_visibility(hidden) == pytest.approx(2 / 3)
    assert attribute_agreement(hidden)[0] == pytest.approx(7 / 8)
    assert object_visibility(sample([[0, 0]] * 3, [[7, 7]] * 3)) == 1.0


def test_attribute_colours_make_every_ink_and_paper_step_visible() -> None:
    config = {"type": "attributes", "attribute_encoding": "colours", "frame_stack": 1}
    colours = OakEmuEnv("catch", config, seed=5)
    raw = OakEmuEnv("catch", {**config, "attribute_encoding": "byte"}, seed=5)
    cells, _ = colours.reset(seed=5)
    attribute_bytes, _ = raw.reset(seed=5)
    assert cells.shape == (2, 23, 32) and attribute_bytes.shape == (1, 23, 32)
    bright = (attribute_bytes[0] >> 6) & 1
    assert np.array_equal(cells[0], ((attribute_bytes[0] & 7) + 8 * bright) * 17)
    assert np.array_equal(cells[1], (((attribute_bytes[0] >> 3) & 7) + 8 * bright) * 17)
    # Every two attributes that differ in ink, paper or brightness differ by >= 17 of 255.
    table = ATTRIBUTE_COLOURS.astype(int)
    for a in range(128):
        for b in range(a + 1, 128):
            assert np.abs(table[:, a] - table[:, b]).max() >= 17
    colours.close()
    raw.close()


def test_auto_refuses_the_settings_it_chooses() -> None:
    for field, value in (("height", 40), ("width", 40), ("crop", {"x": 0, "y": 0})):
        with pytest.raises(ValidationError, match=f"type 'auto' chooses {field}"):
            ObservationConfig.model_validate({"type": "auto", field: value})
    # A saved configuration lists every field, the defaults among them: still valid.
    saved = AUTO.model_dump(mode="json")
    assert ObservationConfig.model_validate(saved) == AUTO


RAM = {"type": "ram", "ram": ["score"]}


@pytest.mark.parametrize(
    ("name", "setting", "where", "acts_on"),
    [
        ("attribute_encoding", {"type": "screen"}, "'attributes' or 'auto'", "attributes"),
        ("attribute_encoding", RAM, "'attributes' or 'auto'", "attributes"),
        ("grayscale", {"type": "attributes"}, "'screen' or 'auto'", "screen"),
        ("grayscale", RAM, "'screen' or 'auto'", "screen"),
        ("height", {"type": "attributes"}, "'screen'", "screen"),
        ("width", {"type": "attributes"}, "'screen'", "screen"),
        ("crop", RAM, "'screen' or 'attributes'", "attributes"),
        ("ram", {"type": "screen"}, "'ram'", "ram"),
    ],
)
def test_a_setting_that_would_do_nothing_is_refused(
    name: str, setting: dict[str, object], where: str, acts_on: str
) -> None:
    value = {"attribute_encoding": "byte", "grayscale": False, "height": 24, "width": 32,
             "crop": {"x": 0, "y": 0}, "ram": ["score"]}[name]  # fmt: skip
    with pytest.raises(ValidationError, match=f"{name} applies to a {where} observation, not"):
        ObservationConfig.model_validate({**setting, name: value})
    # The same setting where it acts is accepted.
    ObservationConfig.model_validate({"type": acts_on, name: value})


def test_auto_resolves_to_settings_its_type_accepts() -> None:
    # grayscale: false under auto is for a screen choice; an attributes choice drops it.
    colour = ObservationConfig(type="auto", grayscale=False, frame_stack=1)
    assert choose_observation(colour, load_game("catch")).config.type == "attributes"
    assert choose_observation(colour, load_game("star_guard")).config.grayscale is False


def test_a_screen_crop_is_what_the_agent_sees() -> None:
    crop = {"x": 64, "y": 16, "width": 128, "height": 96}
    config = ObservationConfig(type="screen", crop=crop, height=48, width=64, frame_stack=1)
    env = OakEmuEnv("catch", config, seed=5)
    obs, _ = env.reset()
    screen = env.machine.screen()[16:112, 64:192]
    expected = GRAY_LUT[screen].reshape(48, 2, 64, 2).mean(axis=(1, 3))
    assert obs.shape == (1, 48, 64)
    assert np.abs(obs[0].astype(float) - expected).max() <= 1.0
    attributes = OakEmuEnv("catch", {"type": "attributes", "crop": crop, "frame_stack": 1})
    cells, _ = attributes.reset(seed=5)
    assert cells.shape == (18, 12, 16)
    attribute_bytes = attributes.machine.attributes()[2:14, 8:24]
    assert np.array_equal(cells, ATTRIBUTE_PLANES[:, attribute_bytes])
    with pytest.raises(ValidationError, match="runs off the 256x192 screen"):
        ScreenRegion(x=200, y=0, width=128, height=64)


def test_config_show_says_what_auto_chose_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "auto.yaml"
    game = str(bundled_games()["catch"])
    config.write_text(yaml.safe_dump({"game": game, "env": {"observation": {"type": "auto"}}}))
    assert main(["config", "show", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "auto chose attributes" in out and "cells that changed" in out
