"""`observation: auto`: choose what the agent sees from what the game's screen shows.

The game is played with random actions for a few hundred steps and its play area is
read as 8x8 cells, each cell at each step a 64-pixel colour pattern:

- When every cell that changes shows the pattern its colour-attribute byte implies (the
  same attribute byte always looks the same), and every object (a pattern other than the
  background's) stands on an attribute of its own rather than the background's, the
  attributes say everything the pixels do, in 64 times fewer numbers: the choice is
  `attributes`. Games that draw their sprites as coloured blocks or as cell-aligned glyphs
  of their own colour are such games. The object test counts occurrences of objects, so
  a rare sprite drawn in the background's colours (a black bird on the sky) weighs as
  much as the common ones, though the cells it changes are few among all that change.
- Otherwise the pixels matter (sprites that move pixel by pixel, several shapes in one
  colour, sprites in the background's colours): the choice is `screen`, cropped to the
  cells that ever show something, and scaled down by a whole factor that leaves an 8x8
  cell at least 2x2 pixels, so a cell's content stays visible (a one-pixel shot becomes
  a grey dot, not nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..games.loader import GameDefinition, load_game
from ..games.session import GameSession
from .gym_backend import is_gym_id
from .observation import ObservationConfig, ScreenRegion

SAMPLE_STEPS = 400
"""Random-play steps the choice looks at."""

ATTRIBUTE_AGREEMENT = 0.97
"""Share of changing cells that must look as their attribute implies for `attributes`,
and share of object occurrences that must stand on an attribute of their own."""

LARGEST_SIDE = 96
"""A screen observation is scaled down until its longer side is at most this."""


@dataclass(frozen=True)
class ObservationChoice:
    """What `observation: auto` chose for one game, and why."""

    config: ObservationConfig
    reason: str

    def describe(self) -> str:
        """One line: 'attributes (23x32 cells): ...' or 'screen 46x64 of ...: ...'."""
        c = self.config
        if c.type == "attributes":
            return f"attributes: {self.reason}"
        crop = c.crop
        assert crop is not None
        return (
            f"screen {c.height}x{c.width} ({'grayscale' if c.grayscale else 'colour'}) of the "
            f"{crop.height}x{crop.width} area at ({crop.x}, {crop.y}): {self.reason}"
        )


@dataclass(frozen=True)
class CellSample:
    """The play area's cells over random play: `patterns[t, r, c]` is the id of the colour
    pattern of cell (r, c) at step t, `attributes[t, r, c]` its attribute byte."""

    patterns: npt.NDArray[np.int64]
    attributes: npt.NDArray[np.uint8]
    first_row: int
    first_col: int


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
    _, ids = np.unique(flat.view(np.dtype((np.void, 64))).ravel(), return_inverse=True)
    return CellSample(ids.reshape(shape), np.stack(attributes), rows.start, cols.start)


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


def _screen_crop(sample: CellSample) -> ScreenRegion:
    """The cells that ever change or ever differ from the background (the commonest
    pattern), as a pixel region."""
    patterns = sample.patterns
    background = np.bincount(patterns.ravel()).argmax()
    shown = (patterns != patterns[:1]).any(axis=0) | (patterns != background).any(axis=0)
    if not shown.any():
        shown[:] = True
    rows = np.flatnonzero(shown.any(axis=1))
    cols = np.flatnonzero(shown.any(axis=0))
    return ScreenRegion(
        x=(sample.first_col + int(cols[0])) * 8,
        y=(sample.first_row + int(rows[0])) * 8,
        width=(int(cols[-1]) - int(cols[0]) + 1) * 8,
        height=(int(rows[-1]) - int(rows[0]) + 1) * 8,
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
    crop = _screen_crop(sample)
    factor = 2
    while max(crop.width, crop.height) / factor > LARGEST_SIDE and factor < 4:
        factor *= 2
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
        f"{seen}, {why}; cropped to the cells that ever show something and scaled by "
        f"1/{factor}, so an 8x8 cell stays {8 // factor}x{8 // factor} pixels"
    )
    resolved = ObservationConfig(
        type="screen",
        crop=crop,
        height=crop.height // factor,
        width=crop.width // factor,
        frame_stack=stack,
        grayscale=config.grayscale,
    )
    return ObservationChoice(resolved, reason)
