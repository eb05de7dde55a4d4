"""Observation pipeline: play-area crop, grayscale or colour, resize, frame stack; or RAM."""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..emulator.machine import ZXSpectrum
from ..emulator.screen import PALETTE
from ..games.loader import GameDefinition
from ..games.schema import DataVariable
from .resample import AreaResampler, native_kernel

# ITU-R 601 luma of the 16 Spectrum colours.
GRAY_LUT = np.round(PALETTE @ np.array([0.299, 0.587, 0.114])).astype(np.uint8)


def _attribute_colours() -> npt.NDArray[np.uint8]:
    """[channel, attribute byte] -> ink (channel 0) or paper (1) colour number, bright
    adding 8, times 17: spread over 0-255 so that every colour step is visible to a
    network that reads observations / 255."""
    byte = np.arange(256)
    bright = (byte >> 6) & 1
    ink = (byte & 7) + 8 * bright
    paper = ((byte >> 3) & 7) + 8 * bright
    return (np.stack([ink, paper]) * 17).astype(np.uint8)


ATTRIBUTE_COLOURS = _attribute_colours()


ATTRIBUTE_PLANES_COUNT = 18
"""Planes a frame of `attribute_encoding: planes` has: 8 ink colours, 8 paper colours,
bright, flash."""


def _attribute_planes() -> npt.NDArray[np.uint8]:
    """[plane, attribute byte] -> 255 where the plane holds, else 0: planes 0-7 say the
    ink colour (one plane per colour), 8-15 the paper colour, 16 bright, 17 flash. Any
    two attribute bytes that differ differ by 255 in some plane, and any two inks (or
    papers) are equally far apart: a network's first layer sees every colour along a
    direction of its own, instead of as a level on one axis where neighbours nearly merge."""
    byte = np.arange(256)
    planes = np.zeros((ATTRIBUTE_PLANES_COUNT, 256), dtype=np.uint8)
    planes[byte & 7, byte] = 255
    planes[8 + ((byte >> 3) & 7), byte] = 255
    planes[16] = np.where(byte & 0x40, 255, 0)
    planes[17] = np.where(byte & 0x80, 255, 0)
    return planes


ATTRIBUTE_PLANES = _attribute_planes()


class RamRange(BaseModel):
    """A range of memory bytes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    address: int = Field(ge=0, le=0xFFFF, description="First byte's address.")
    length: int = Field(1, ge=1, le=0x10000, description="Bytes from `address` on.")


class ScreenRegion(BaseModel):
    """A rectangle of the 256x192 screen, in pixels."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    x: int = Field(0, ge=0, le=255, description="Left column.")
    y: int = Field(0, ge=0, le=191, description="Top row.")
    width: int = Field(256, ge=8, le=256, description="Columns.")
    height: int = Field(192, ge=8, le=192, description="Rows.")

    @model_validator(mode="after")
    def _inside_screen(self) -> ScreenRegion:
        if self.x + self.width > 256 or self.y + self.height > 192:
            raise ValueError(
                f"the region {self.width}x{self.height} at ({self.x}, {self.y}) runs off the "
                "256x192 screen"
            )
        return self


DEFAULT_SIZE = 84
AUTO_CHOSEN = ("height", "width", "crop")
"""Settings that `type: auto` chooses itself."""
APPLIES_TO: dict[str, tuple[str, ...]] = {
    "crop": ("screen", "attributes"),
    "grayscale": ("screen", "auto"),
    "attribute_encoding": ("attributes", "auto"),
    "height": ("screen",),
    "width": ("screen",),
    "ram": ("ram",),
    "variable_planes": ("attributes",),
}
"""The observation types each setting acts on; set to anything but its default on
another type, it would do nothing, so it is refused."""


class ObservationConfig(BaseModel):
    """What the agent sees.

    - `screen`: the play area (or `crop`), grayscale or colour, resized to height x
      width, the last `frame_stack` frames stacked on the channel axis (channels first).
    - `attributes`: the colours of the play area's (or crop's) 8x8 cells, read from their
      attribute bytes: by default one plane per ink colour, per paper colour, bright
      and flash (see `attribute_encoding`).
    - `ram`: bytes of named data variables or explicit address ranges.
    - `auto`: `attributes`, or a `screen` of the whole play area (in colour where
      grayscale would merge what the game draws), chosen from how the game draws (see
      `oakemu_rl.envs.observation_choice`); `config show` says which and why.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["screen", "attributes", "ram", "auto"] = Field(
        "screen",
        description="'screen': pixels of the play area; 'attributes': its 8x8 cells' "
        "colours from their attribute bytes; 'ram': bytes of memory named in `ram`; 'auto': "
        "attributes where the game's sprites are attribute blocks or cell glyphs, else the "
        "play area's screen at a size that keeps 8x8 cells visible, in colour where grayscale "
        "would merge what the game draws (chosen per game from random play).",
    )
    crop: ScreenRegion | None = Field(
        None,
        description="For 'screen' and 'attributes': the part of the screen seen instead of "
        "the game's play area (null: the play area).",
    )
    grayscale: bool = Field(
        True,
        description="Screen in grayscale (else RGB, 3 channels a frame). Under 'auto', true "
        "lets auto choose grayscale where it merges nothing the game draws, else colour.",
    )
    attribute_encoding: Literal["planes", "colours", "byte"] = Field(
        "planes",
        description="For 'attributes' (and what 'auto' gives where it chooses attributes): "
        "'planes' gives 18 channels a frame, one per ink colour, one per paper colour, bright "
        "and flash, each 0 or 255, so any two colours are equally far apart; 'colours' gives "
        "two channels, each cell's ink and paper colour (0-15, bright adds 8) times 17, where "
        "two inks may differ by only 17 of 255; 'byte' gives the raw attribute byte, one "
        "channel, where inks differ by 1-7.",
    )
    height: int = Field(
        DEFAULT_SIZE,
        ge=8,
        le=192,
        description="Screen rows after resizing the play area (chosen by type 'auto', "
        "where it is left out).",
    )
    width: int = Field(
        DEFAULT_SIZE,
        ge=8,
        le=256,
        description="Screen columns after resizing (chosen by type 'auto').",
    )
    frame_stack: int = Field(
        4, ge=1, le=16, description="The last frames stacked on the channel axis."
    )
    ram: list[str | RamRange] = Field(
        default_factory=list,
        description="For 'ram': data variables of the game YAML by name, or {address, length}.",
    )

    variable_planes: list[str] = Field(
        default_factory=list,
        description="For 'attributes' (planes or colours): data variables of the game YAML "
        "shown after each frame's attribute planes, one plane per bit of the variable (0 or "
        "255 over the whole plane, least significant bit first): state that the screen does "
        "not draw, such as a frame counter, made visible to the network.",
    )

    @property
    def binary(self) -> bool:
        """Every value of this observation is 0 or 255 (`attributes` as `planes`)."""
        return self.type == "attributes" and self.attribute_encoding == "planes"

    @model_validator(mode="after")
    def _ram_needs_ranges(self) -> ObservationConfig:
        if self.type == "ram" and not self.ram:
            raise ValueError("a 'ram' observation needs at least one entry in 'ram'")
        if self.variable_planes and self.attribute_encoding == "byte":
            raise ValueError(
                "variable_planes adds planes to an 'attributes' observation of 'planes' or "
                "'colours'; attribute_encoding 'byte' has no plane axis to add them on"
            )
        if len(set(self.variable_planes)) < len(self.variable_planes):
            raise ValueError(f"variable_planes names a variable twice: {self.variable_planes}")
        # A saved configuration lists every field: a default, or what an earlier version
        # saved as the default, is not a choice.
        chosen = [
            name
            for name in APPLIES_TO
            if getattr(self, name) != _default(name)
            and getattr(self, name) not in SAVED_DEFAULTS.get(name, ())
        ]
        by_auto = [name for name in chosen if name in AUTO_CHOSEN]
        if self.type == "auto" and by_auto:
            raise ValueError(
                f"type 'auto' chooses {', '.join(by_auto)} itself; set type 'screen' or "
                "'attributes' to choose them"
            )
        for name in chosen:
            if self.type not in APPLIES_TO[name]:
                kinds = " or ".join(f"'{kind}'" for kind in APPLIES_TO[name])
                raise ValueError(
                    f"{name} applies to a {kinds} observation, not to '{self.type}', "
                    f"where it would do nothing; leave it out"
                )
        return self


SAVED_DEFAULTS: dict[str, tuple[object, ...]] = {"attribute_encoding": ("colours",)}
"""Earlier defaults that saved configurations (a run's `config.yaml`) list on every
observation type: read there as the default they were, not as a setting that does nothing."""


def _default(name: str) -> object:
    field = ObservationConfig.model_fields[name]
    return field.get_default(call_default_factory=True)


def named_variables(config: ObservationConfig, game: GameDefinition) -> dict[str, DataVariable]:
    """The data variables of `game` that `config` names (its `ram` entries by name and its
    `variable_planes`); raises ValueError naming the first that `game` does not define."""
    entries = [("ram entry", entry) for entry in config.ram if isinstance(entry, str)]
    entries += [("variable_planes entry", name) for name in config.variable_planes]
    variables: dict[str, DataVariable] = {}
    for what, name in entries:
        try:
            variables[name] = game.data_variable(name)
        except ValueError as exc:
            raise ValueError(f"observation {what} {exc}") from None
    return variables


class ObservationPipeline:
    """Builds observations from a machine, keeping the frame stack."""

    def __init__(self, config: ObservationConfig, game: GameDefinition) -> None:
        if config.type == "auto":
            raise ValueError(
                "observation type 'auto' is resolved for a game first "
                "(oakemu_rl.envs.observation_choice.choose_observation)"
            )
        self.config = config
        area = config.crop or game.spec.play_area
        self._rows = slice(area.y, area.y + area.height)
        self._cols = slice(area.x, area.x + area.width)
        self._cell_rows = slice(area.y // 8, (area.y + area.height + 7) // 8)
        self._cell_cols = slice(area.x // 8, (area.x + area.width + 7) // 8)
        named = named_variables(config, game)
        self._ram: list[tuple[int, int]] = [
            (entry.address, entry.length)
            if isinstance(entry, RamRange)
            else (named[entry].address, named[entry].size)
            for entry in config.ram
        ]
        self._variable_planes = [named[name] for name in config.variable_planes]
        if config.type == "screen" and (config.height > area.height or config.width > area.width):
            raise ValueError(
                f"observation {config.height}x{config.width} is larger than the "
                f"{'crop' if config.crop else 'play area'} {area.height}x{area.width} of "
                f"{game.path}; observations only downscale"
            )
        self._area = (area.x, area.y, area.width, area.height)
        self._kernel = native_kernel()
        self._resampler = (
            AreaResampler(area.height, area.width, config.height, config.width)
            if config.type == "screen"
            else None
        )
        self._lut = GRAY_LUT if config.grayscale else PALETTE
        frame = self._frame_shape()
        k = config.frame_stack
        self._stack = np.zeros((k, *frame), dtype=np.uint8)
        if config.type == "screen" and not config.grayscale:
            shape: tuple[int, ...] = (k * 3, config.height, config.width)
        elif config.type == "ram":
            shape = (k * frame[0],)
        else:
            shape = (k * frame[0], *frame[1:]) if len(frame) == 3 else (k, *frame)
        self.space = spaces.Box(0, 255, shape=shape, dtype=np.uint8)

    def _frame_shape(self) -> tuple[int, ...]:
        c = self.config
        if c.type == "screen":
            return (c.height, c.width) if c.grayscale else (3, c.height, c.width)
        if c.type == "attributes":
            rows = self._cell_rows.stop - self._cell_rows.start
            cols = self._cell_cols.stop - self._cell_cols.start
            if c.attribute_encoding == "byte":
                return (rows, cols)
            planes = ATTRIBUTE_PLANES_COUNT if c.attribute_encoding == "planes" else 2
            planes += sum(8 * var.size for var in self._variable_planes)
            return (planes, rows, cols)
        return (sum(size for _, size in self._ram),)

    def frame(self, machine: ZXSpectrum) -> npt.NDArray[np.uint8]:
        """The current single frame (before stacking)."""
        c = self.config
        if c.type == "attributes":
            cells = machine.attributes()[self._cell_rows, self._cell_cols]
            if c.attribute_encoding == "byte":
                return cells
            table = ATTRIBUTE_PLANES if c.attribute_encoding == "planes" else ATTRIBUTE_COLOURS
            if not self._variable_planes:
                return table[:, cells]
            return np.concatenate([table[:, cells], self._bit_planes(machine, cells.shape)])
        if c.type == "ram":
            data = b"".join(machine.read(a, n) for a, n in self._ram)
            return np.frombuffer(data, dtype=np.uint8)
        channels = 1 if c.grayscale else 3
        if self._kernel is not None:
            frame = np.empty((c.height, c.width, channels), dtype=np.uint8)
            self._kernel.render_area(
                machine.display_memory(), machine.flash_phase, channels, self._lut,
                *self._area, frame, c.height, c.width,
            )  # fmt: skip
        else:
            assert self._resampler is not None
            pixels = machine.render(self._lut, self._rows)[:, self._cols]
            frame = self._resampler(pixels).reshape(c.height, c.width, channels)
        return frame[..., 0] if c.grayscale else np.ascontiguousarray(frame.transpose(2, 0, 1))

    def _bit_planes(self, machine: ZXSpectrum, shape: tuple[int, ...]) -> npt.NDArray[np.uint8]:
        """One plane per bit of each of `variable_planes`, least significant first."""
        data = b"".join(machine.read(var.address, var.size) for var in self._variable_planes)
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little") * 255
        return np.broadcast_to(bits[:, None, None], (bits.size, *shape))

    def reset(self, machine: ZXSpectrum) -> npt.NDArray[np.uint8]:
        self._stack[:] = self.frame(machine)
        return self._stacked()

    def push(self, machine: ZXSpectrum) -> npt.NDArray[np.uint8]:
        self._stack[:-1] = self._stack[1:]
        self._stack[-1] = self.frame(machine)
        return self._stacked()

    def _stacked(self) -> npt.NDArray[np.uint8]:
        return self._stack.reshape(self.space.shape).copy()
