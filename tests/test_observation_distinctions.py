"""Every distinction the screen draws survives the observation `auto` gives: one plane
per colour for attributes (maze_gems' player and gems), colour where grayscale merges
sprites and a crop that never cuts off where the game draws (sky_harvest's balloon and
birds). Real games on the real emulator."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from oakemu_rl.envs import OakEmuEnv
from oakemu_rl.envs.observation import ATTRIBUTE_PLANES, ObservationConfig
from oakemu_rl.envs.observation_choice import (
    CLEAR,
    FAINT,
    CellSample,
    choose_observation,
    grayscale_merge,
)
from oakemu_rl.games.loader import load_game

AUTO = ObservationConfig(type="auto", frame_stack=1)


def test_attribute_planes_put_any_two_colours_equally_far_apart() -> None:
    table = ATTRIBUTE_PLANES.astype(int)
    assert set(np.unique(table).tolist()) == {0, 255}
    # Any two attribute bytes differ by 255 in some plane.
    differ = (table[:, :, None] != table[:, None, :]).any(axis=0)
    assert differ.sum() == 256 * 255
    # Any two inks (paper, bright and flash alike) differ in exactly two planes, by 255.
    for paper in range(8):
        inks = [paper << 3 | ink for ink in range(8)]
        for a in inks:
            for b in inks:
                if a != b:
                    assert (table[:, a] != table[:, b]).sum() == 2
    # Ink, paper, bright and flash: one plane each, set.
    assert np.flatnonzero(table[:, 0b1110_1001]).tolist() == [1, 8 + 5, 16, 17]


def player_and_gem(env: OakEmuEnv) -> tuple[tuple[int, int], tuple[int, int]]:
    """maze_gems' player cell and one gem cell (screen rows and columns): the player from
    the YAML's player_x/player_y, a gem by its attribute (col_gem, bright cyan on black)."""
    data = env.game.spec.data
    column = env.machine.read(data["player_x"].address, 1)[0]
    row = env.machine.read(data["player_y"].address, 1)[0]
    attributes = env.machine.attributes()
    assert attributes[row, column] == 0x46  # col_player: bright yellow on black
    gems = np.argwhere(attributes == 0x45)
    assert len(gems)
    return (row, column), (int(gems[0][0]), int(gems[0][1]))


def test_maze_gems_player_and_gem_are_far_apart_in_what_auto_gives() -> None:
    choice = choose_observation(AUTO, load_game("maze_gems"))
    assert (choice.config.type, choice.config.attribute_encoding) == ("attributes", "planes")
    env = OakEmuEnv("maze_gems", AUTO, seed=3)
    obs, _ = env.reset(seed=3)
    (pr, pc), (gr, gc) = player_and_gem(env)
    top = env.game.spec.play_area.y // 8
    player = obs[:, pr - top, pc].astype(int)
    gem = obs[:, gr - top, gc].astype(int)
    # Yellow ink and cyan ink: two planes apart, each by the full 255.
    assert np.abs(player - gem).max() == 255
    assert (player != gem).sum() == 2
    env.close()
    # In the 'colours' encoding they are 238 and 221: 17 of 255 apart.
    colours = OakEmuEnv("maze_gems", {"type": "attributes", "attribute_encoding": "colours"})
    obs, _ = colours.reset(seed=3)
    (pr, pc), (gr, gc) = player_and_gem(colours)
    assert (obs[-2, pr - top, pc], obs[-2, gr - top, gc]) == (238, 221)
    colours.close()


def patch(
    obs: npt.NDArray[np.uint8], row: int, column: int, config: ObservationConfig
) -> npt.NDArray[np.int64]:
    """The pixels of screen cell (row, column) in a screen observation of `config`."""
    crop = config.crop
    assert crop is not None
    factor = crop.height // config.height
    top = (row * 8 - crop.y) // factor
    left = (column * 8 - crop.x) // factor
    assert top >= 0 and top + 8 // factor <= config.height, "the cell is cropped off"
    return obs[:, top : top + 8 // factor, left : left + 8 // factor].astype(int)


SKY = np.array([0, 255, 255])
"""Bright cyan: sky_harvest's sky (col_sky)."""
STEPS = 1500


def test_sky_harvest_balloon_is_always_visible_and_apart_from_the_birds() -> None:
    game = load_game("sky_harvest")
    config = choose_observation(AUTO, game).config
    assert config.type == "screen" and not config.grayscale
    data = game.spec.data
    env = OakEmuEnv(game, AUTO, seed=0)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    sky = np.broadcast_to(SKY[:, None, None], (3, 2, 2))
    birds_seen = balloon_rows = 0
    for _ in range(STEPS):
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(game.num_actions)))
        read = {name: env.machine.read(data[name].address, 1)[0] for name in data}
        balloon = patch(obs, read["player_y"], read["player_x"], config)
        # Visible on the sky, even in screen row 1, the top of the play area.
        assert np.abs(balloon - sky).max() >= CLEAR
        balloon_rows += read["player_y"] == 1
        for bird in range(6):
            y, x = read[f"bird{bird}_y"], read[f"bird{bird}_x"]
            if y == 0 or (y, x) == (read["player_y"], read["player_x"]):
                continue
            birds_seen += 1
            assert np.abs(balloon - patch(obs, y, x, config)).max() >= CLEAR
        if terminated or truncated:
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
    env.close()
    assert birds_seen > STEPS and balloon_rows > 0


def looks_sample(looks: list[npt.NDArray[np.uint8]]) -> CellSample:
    """A sample that showed these 8x8 cells (colour indices), one step each."""
    count = len(looks)
    return CellSample(
        patterns=np.arange(count, dtype=np.int64).reshape(count, 1, 1),
        attributes=np.zeros((count, 1, 1), dtype=np.uint8),
        looks=np.stack(looks).astype(np.uint8),
    )


def cell(paper: int, ink: int, pixels: int) -> npt.NDArray[np.uint8]:
    """A cell of `paper` with `pixels` pixels of `ink` in its top-left 4x4 block."""
    look = np.full((8, 8), paper, dtype=np.uint8)
    look[:4, :4].flat[:pixels] = ink
    return look


def test_grayscale_merge_finds_a_sparse_dark_sprite_and_a_denser_lighter_one() -> None:
    # On bright cyan (gray 179): 4 black pixels and 6 bright red ones (gray 76) average
    # to 134 and 140 in gray at 1/4; in colour the red one has 96 of red the other lacks.
    sample = looks_sample([cell(13, 13, 0), cell(13, 0, 4), cell(13, 10, 6)])
    merge = grayscale_merge(sample, 4)
    assert merge is not None and merge.gray < FAINT <= CLEAR <= merge.colour
    assert {merge.first, merge.second} == {(0, 13), (10, 13)}
    assert "black and bright cyan" in merge.describe()
    # Unscaled, every pixel keeps its own gray level: black and red are 76 apart.
    assert grayscale_merge(sample, 1) is None
    # Black and white sprites: gray keeps every difference colour shows.
    assert grayscale_merge(looks_sample([cell(0, 15, n) for n in (0, 4, 9)]), 4) is None


def test_saved_configurations_keep_their_attribute_encoding() -> None:
    # Configurations saved while 'colours' was the default list it on every type.
    saved_screen = ObservationConfig(type="screen").model_dump(mode="json")
    assert ObservationConfig.model_validate({**saved_screen, "attribute_encoding": "colours"})
    saved = ObservationConfig(type="attributes", frame_stack=2).model_dump(mode="json")
    old = ObservationConfig.model_validate({**saved, "attribute_encoding": "colours"})
    env = OakEmuEnv("catch", old)
    assert env.observation_space.shape == (4, 23, 32)
    env.close()
    # An old run directory that stored `auto` with it still gets what it trained on.
    old_auto = ObservationConfig.model_validate(
        {**AUTO.model_dump(mode="json"), "attribute_encoding": "colours"}
    )
    assert choose_observation(old_auto, load_game("catch")).config.attribute_encoding == "colours"


@pytest.mark.parametrize("encoding", ["planes", "colours", "byte"])
def test_every_attribute_encoding_is_a_frame_of_the_cells(encoding: str) -> None:
    env = OakEmuEnv("catch", {"type": "attributes", "attribute_encoding": encoding})
    obs, _ = env.reset(seed=1)
    planes = {"planes": 18, "colours": 2, "byte": 1}[encoding]
    assert obs.shape == (4 * planes, 23, 32) and env.observation_space.contains(obs)
    env.close()
