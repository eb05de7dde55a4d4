"""`observation: auto`: choose what the agent sees from what the game's screen shows.

The game is played with random actions for a few hundred steps and its play area is
read as 8x8 cells, each cell at each step a 64-pixel colour pattern:

- When every cell that changes shows the pattern its colour-attribute byte implies (the
  same attribute byte always looks the same), and every object (a pattern other than the
  background's) stands on an attribute of its own rather than the background's, the
  attributes say everything the pixels do, in 64 times fewer numbers: the choice is
  `attributes`, in the configured `attribute_encoding` (by default one plane per colour,
  so no two colours are a few levels apart). Games that draw their sprites as coloured
  blocks or as cell-aligned glyphs of their own colour are such games. The object test
  counts occurrences of objects, so a rare sprite drawn in the background's colours (a
  black bird on the sky) weighs as much as the common ones, though the cells it changes
  are few among all that change.
- Otherwise the pixels matter (sprites that move pixel by pixel, several shapes in one
  colour, sprites in the background's colours): the choice is `screen`, of the whole play
  area (the game YAML's statement of where the game draws: a random sample can miss a
  row that objects reach only now and then, so it never narrows the crop), scaled down by
  a whole factor that leaves an 8x8 cell at least 2x2 pixels, so a cell's content stays
  visible (a one-pixel shot becomes a dot, not nothing). It is grayscale unless grayscale
  merges what the game draws: scaled down, a pixel mixes a cell's colours, and in gray a
  sparse dark sprite and a denser lighter one on the same sky come out alike, where RGB
  keeps them apart; when two cell patterns of the sample that colour shows at least
  `CLEAR` apart come out less than `FAINT` apart in gray, the screen stays in colour.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..emulator.screen import PALETTE
from ..games.loader import GameDefinition, load_game
from ..games.session import GameSession
from .gym_backend import is_gym_id
from .observation import GRAY_LUT, ObservationConfig, ScreenRegion

SAMPLE_STEPS = 400
"""Random-play steps the choice looks at."""

ATTRIBUTE_AGREEMENT = 0.97
"""Share of changing cells that must look as their attribute implies for `attributes`,
and share of object occurrences that must stand on an attribute of their own."""

LARGEST_SIDE = 96
"""A screen observation is scaled down until its longer side is at most this."""

CLEAR = 64
"""Two cell looks that colour shows at least this far apart (of 255, in some pixel of the
scaled observation) are a difference the agent should see."""

FAINT = int(GRAY_LUT[1])
"""A difference in gray below this (of 255) is fainter than blue on black, the faintest
colour on black: grayscale merges two looks that it shows less than this far apart."""

COLOUR_NAMES = ("black", "blue", "red", "magenta", "green", "cyan", "yellow", "white")


@dataclass(frozen=True)
class ObservationChoice:
    """What `observation: auto` chose for one game, and why."""

    config: ObservationConfig
    reason: str

    def describe(self) -> str:
        """One line: 'attributes (planes): ...' or 'screen 46x64 (colour) of ...: ...'."""
        c = self.config
        if c.type == "attributes":
            return f"attributes ({c.attribute_encoding}): {self.reason}"
        crop = c.crop
        assert crop is not None
        return (
            f"screen {c.height}x{c.width} ({'grayscale' if c.grayscale else 'colour'}) of the "
            f"{crop.height}x{crop.width} area at ({crop.x}, {crop.y}): {self.reason}"
        )


@dataclass(frozen=True)
class CellSample:
    """The play area's cells over random play: `patterns[t, r, c]` is the id of the colour
    pattern of cell (r, c) at step t, `attributes[t, r, c]` its attribute byte, and
    `looks[id]` the 8x8 colour indices (0-15) of pattern `id`."""

    patterns: npt.NDArray[np.int64]
    attributes: npt.NDArray[np.uint8]
    looks: npt.NDArray[np.uint8]


def sample_cells(game: GameDefinition, steps: int = SAMPLE_STEPS, seed: int = 0) -> CellSample:
    """Play `game` with random actions for `steps` steps (new episodes as they end) and
    record the play area's cells after each."""
    area = game.spec.play_area
    rows = slice(area.y // 8, (area.y + area.height + 7) // 8)
    cols = slice(area.x // 8, (area.x + area.width + 7) // 8)
    rng = np.random.default_rng(seed)
    session = GameSession(game)
    session.reset(int(rng.integers(0, 2**31 - 1)))
    screens, attributes = [], []
    for _ in range(steps):
        outcome = session.step(int(rng.integers(0, game.num_actions))).outcome
        machine = session.machine
        screens.append(machine.screen().reshape(24, 8, 32, 8)[rows, :, cols, :])
        attributes.append(machine.attributes()[rows, cols])
        if outcome is not None:
            session.reset(int(rng.integers(0, 2**31 - 1)))
    pixels = np.stack(screens).transpose(0, 1, 3, 2, 4)  # (t, rows, cols, 8, 8)
    shape = pixels.shape[:3]
    flat = np.ascontiguousarray(pixels.reshape(-1, 64))
    _, first, ids = np.unique(
        flat.view(np.dtype((np.void, 64))).ravel(), return_index=True, return_inverse=True
    )
    looks = flat[first].reshape(-1, 8, 8)
    return CellSample(ids.reshape(shape), np.stack(attributes), looks)


def _changing_cells(
    sample: CellSample,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """The pattern ids and attribute bytes of the cells that ever change, at every step
    (flat), and how many such cells there are."""
    changing = (sample.patterns != sample.patterns[:1]).any(axis=0)
    patterns = sample.patterns[:, changing].ravel()
    attributes = sample.attributes[:, changing].ravel().astype(np.int64)
    return patterns, attributes, int(changing.sum())


def attribute_agreement(sample: CellSample) -> tuple[float, int]:
    """The share of changing cell observations whose pattern is the one their attribute
    byte shows most often, and how many changing cells there are."""
    patterns, attributes, changing = _changing_cells(sample)
    if not changing:
        return 0.0, 0
    pairs, counts = np.unique(attributes * (int(patterns.max()) + 1) + patterns, return_counts=True)
    best = np.zeros(256, dtype=np.int64)
    np.maximum.at(best, pairs // (int(patterns.max()) + 1), counts)
    return float(best.sum() / patterns.size), changing


def object_visibility(sample: CellSample) -> float:
    """The share of object occurrences on changing cells (a pattern other than the
    background, their commonest pattern) whose attribute byte does not mostly show the
    background: the share of objects the attributes alone reveal (1.0 with none)."""
    patterns, attributes, _ = _changing_cells(sample)
    if not patterns.size:
        return 1.0
    background = patterns == np.bincount(patterns).argmax()
    shows_background = np.bincount(attributes, weights=background, minlength=256)
    cells = np.bincount(attributes, minlength=256)
    background_attribute = 2 * shows_background >= cells
    if background.all():
        return 1.0
    return float(1.0 - background_attribute[attributes[~background]].mean())


@dataclass(frozen=True)
class GrayMerge:
    """Two cell looks of a sample that grayscale shows `gray` apart (of 255) where colour
    shows them `colour` apart, and the colours (0-15) each shows (`first`, `second`)."""

    gray: int
    colour: int
    first: tuple[int, ...]
    second: tuple[int, ...]

    def describe(self) -> str:
        return (
            f"a cell in {_colours(self.first)} and one in {_colours(self.second)} come out "
            f"{self.gray}/255 apart in gray, {self.colour}/255 in colour"
        )


def _colours(colours: tuple[int, ...]) -> str:
    return " and ".join(("bright " if c > 8 else "") + COLOUR_NAMES[c & 7] for c in colours)


def _scaled(
    looks: npt.NDArray[np.uint8], lut: npt.NDArray[np.uint8], factor: int
) -> npt.NDArray[np.int16]:
    """Each look through `lut`, area-averaged by `factor` as a screen observation is
    (rounding half up), flattened: one row of values per look."""
    side = 8 // factor
    values = lut[looks].astype(np.int32).reshape(len(looks), side, factor, side, factor, -1)
    sums = values.sum(axis=(2, 4))
    count = factor * factor
    scaled: npt.NDArray[np.int16] = ((2 * sums + count) // (2 * count)).astype(np.int16)
    return scaled.reshape(len(looks), -1)


def grayscale_merge(sample: CellSample, factor: int) -> GrayMerge | None:
    """The two looks of `sample`, scaled by 1/`factor`, that colour shows at least `CLEAR`
    apart and grayscale shows least apart, where that is less than `FAINT`: what a
    grayscale screen would merge (None where it merges nothing)."""
    colour = _scaled(sample.looks, PALETTE, factor)
    colour, kept = np.unique(colour, axis=0, return_index=True)
    gray = _scaled(sample.looks[kept], GRAY_LUT[:, None], factor)
    best: tuple[int, int, int] | None = None
    chunk = max(1, 2**22 // (len(colour) * colour.shape[1]))
    for start in range(0, len(colour), chunk):
        block = slice(start, start + chunk)
        apart = np.abs(colour[block, None] - colour[None]).max(axis=2)
        gray_apart = np.abs(gray[block, None] - gray[None]).max(axis=2)
        gray_apart = np.where(apart >= CLEAR, gray_apart, np.iinfo(np.int16).max)
        row, col = np.unravel_index(int(gray_apart.argmin()), gray_apart.shape)
        least = int(gray_apart[row, col])
        if least < FAINT and (best is None or least < best[0]):
            best = (least, start + int(row), int(col))
    if best is None:
        return None
    gray_apart_best, i, j = best
    looks = sample.looks[kept]
    return GrayMerge(
        gray=gray_apart_best,
        colour=int(np.abs(colour[i] - colour[j]).max()),
        first=tuple(int(c) for c in np.unique(looks[i])),
        second=tuple(int(c) for c in np.unique(looks[j])),
    )


def choose_observation(config: ObservationConfig, game: GameDefinition) -> ObservationChoice:
    """Resolve `type: auto` for `game` (other types are returned as they are)."""
    if config.type != "auto":
        return ObservationChoice(config, "set in the configuration")
    files = (game.path.resolve(), game.snapshot_path)
    key = (
        *((str(f), f.stat().st_mtime_ns) for f in files),
        config.frame_stack,
        config.grayscale,
        config.attribute_encoding,
    )
    if key not in _CHOICES:
        _CHOICES[key] = _choose(config, game)
    return _CHOICES[key]


def auto_choice(config: ObservationConfig, game: str) -> ObservationChoice | None:
    """What `type: auto` chooses for a run's `game` (a bundled name or a YAML path); None
    when the type is set, or for a `gym:` env, which keeps its own observations."""
    if config.type != "auto" or is_gym_id(game):
        return None
    return choose_observation(config, load_game(game))


_CHOICES: dict[tuple[object, ...], ObservationChoice] = {}
"""Choices made in this process, by game files and the settings auto keeps."""


def _choose(config: ObservationConfig, game: GameDefinition) -> ObservationChoice:
    sample = sample_cells(game)
    agreement, changing = attribute_agreement(sample)
    visibility = object_visibility(sample)
    stack = config.frame_stack
    seen = f"in {len(sample.patterns)} steps of random play"
    if changing and min(agreement, visibility) >= ATTRIBUTE_AGREEMENT:
        rows, cols = sample.attributes.shape[1:]
        reason = (
            f"{seen}, {agreement:.1%} of the {changing} cells that changed showed the pixels "
            f"their colour attribute implies and {visibility:.1%} of the objects stood on "
            f"attributes of their own, so the colours of the {rows}x{cols} cells carry what "
            "the screen shows"
        )
        attributes = ObservationConfig(
            type="attributes", attribute_encoding=config.attribute_encoding, frame_stack=stack
        )
        return ObservationChoice(attributes, reason)
    area = game.spec.play_area
    crop = ScreenRegion(x=area.x, y=area.y, width=area.width, height=area.height)
    factor = 2
    while max(crop.width, crop.height) / factor > LARGEST_SIDE and factor < 4:
        factor *= 2
    merge = grayscale_merge(sample, factor) if config.grayscale else None
    if not changing:
        why = "no cell changed under random play"
    elif agreement < ATTRIBUTE_AGREEMENT:
        why = (
            f"only {agreement:.1%} of the {changing} cells that changed looked as their "
            "colour attribute implies (sprites are drawn in pixels)"
        )
    else:
        why = (
            f"only {visibility:.1%} of the objects stood on attributes of their own (the "
            "others are drawn in the background's colours, which the attributes hide)"
        )
    reason = (
        f"{seen}, {why}; the whole play area (where the game can draw), scaled by "
        f"1/{factor}, so an 8x8 cell stays {8 // factor}x{8 // factor} pixels"
    )
    if merge is not None:
        reason += f"; in colour, as grayscale would merge what the game draws: {merge.describe()}"
    resolved = ObservationConfig(
        type="screen",
        crop=crop,
        height=crop.height // factor,
        width=crop.width // factor,
        frame_stack=stack,
        grayscale=config.grayscale and merge is None,
    )
    return ObservationChoice(resolved, reason)
