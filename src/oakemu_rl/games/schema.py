"""The game-definition schema (DESIGN.md's YAML format), as pydantic models."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    FiniteFloat,
    ValidationError,
    field_validator,
    model_validator,
)

from ..emulator.keyboard import canonical_key
from .variables import FIXED_SIZES, VariableType

ConditionOp = Literal[
    "zero", "nonzero", "positive", "negative", "equal", "not-equal",
    "less-than", "greater-than", "less-or-equal", "greater-or-equal",
]  # fmt: skip
CONDITION_OPS: tuple[str, ...] = ConditionOp.__args__  # type: ignore[attr-defined]
#: The ops that compare the variable with `reference`, which they therefore require.
COMPARISON_OPS: frozenset[str] = frozenset(
    ("equal", "not-equal", "less-than", "greater-than", "less-or-equal", "greater-or-equal")
)

_HEX_ADDRESS = re.compile(r"0[xX][0-9a-fA-F]+")
_DECIMAL_ADDRESS = re.compile(r"[0-9]+")
_ADDRESS_FORMS = (
    "expected a valid integer address: a number such as 0x8009 or 32777, or a string of "
    "'0x' and hex digits (such as '0x8009') or of decimal digits (such as '32777')"
)


def _parse_address(value: Any) -> Any:
    """An int as it is; a '0x...' hex or decimal-digit string as its int; else an error.

    The range is checked afterwards, as for a plain int.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        if _HEX_ADDRESS.fullmatch(value):
            return int(value, 16)
        if _DECIMAL_ADDRESS.fullmatch(value):
            if len(value.lstrip("0")) > 5:  # also keeps int() clear of its digit limit
                raise ValueError(f"address {value!r} is out of range; expected 0x0000-0xFFFF")
            return int(value)
    raise ValueError(f"{_ADDRESS_FORMS}; got {value!r}")


Address = Annotated[int, BeforeValidator(_parse_address)]
KeyName = Annotated[str, AfterValidator(canonical_key)]


def _check_address(value: int) -> int:
    if not 0 <= value <= 0xFFFF:
        raise ValueError(f"address {value:#x} is out of range; expected 0x0000-0xFFFF")
    return value


class StrictModel(BaseModel):
    """A model that names the allowed keys when it meets an unknown one."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = {f.alias or name for name, f in cls.model_fields.items()}
            for key in data:
                if key not in allowed:
                    raise ValueError(
                        f"unknown key {key!r}; expected one of {', '.join(sorted(allowed))}"
                    )
        return data


class PlayArea(StrictModel):
    x: int = Field(0, ge=0, le=255)
    y: int = Field(0, ge=0, le=191)
    width: int = Field(256, ge=8, le=256)
    height: int = Field(192, ge=8, le=192)

    @model_validator(mode="after")
    def _inside_screen(self) -> PlayArea:
        if self.x + self.width > 256 or self.y + self.height > 192:
            raise ValueError(
                f"play area x={self.x} y={self.y} width={self.width} height={self.height} "
                "leaves the 256x192 screen"
            )
        return self


class DataVariable(StrictModel):
    """A named memory variable."""

    address: Address
    type: VariableType
    length: int | None = Field(None, ge=1, le=16)

    _address = field_validator("address")(_check_address)

    @model_validator(mode="after")
    def _length(self) -> DataVariable:
        fixed = FIXED_SIZES.get(self.type)
        if fixed is not None and self.length not in (None, fixed):
            raise ValueError(f"type {self.type} is {fixed} byte(s) long; length {self.length}")
        if self.address + self.size > 0x10000:
            raise ValueError(f"address {self.address:#x} + {self.size} bytes passes 0xFFFF")
        return self

    @property
    def size(self) -> int:
        return FIXED_SIZES.get(self.type) or self.length or 1


class RandomizeStep(StrictModel):
    randomize: list[str] = Field(min_length=1)


class WaitStep(StrictModel):
    wait: int = Field(ge=0, le=100_000)


class PressStep(StrictModel):
    press: list[KeyName]
    frames: int = Field(2, ge=1, le=10_000)


class RunUntilStep(StrictModel):
    run_until: str
    timeout_frames: int = Field(500, ge=1, le=1_000_000)


StartStep = RandomizeStep | WaitStep | PressStep | RunUntilStep
_STEP_KINDS: dict[str, type[StrictModel]] = {
    "randomize": RandomizeStep,
    "wait": WaitStep,
    "press": PressStep,
    "run_until": RunUntilStep,
}


class VariableReward(StrictModel):
    reward: FiniteFloat = 0.0
    penalty: FiniteFloat = 0.0


class RewardSpec(StrictModel):
    """Every number here must be finite: no .inf or .nan."""

    variables: dict[str, VariableReward] = Field(default_factory=dict)
    events: dict[str, FiniteFloat] = Field(default_factory=dict)
    time: FiniteFloat = 0.0


class Condition(StrictModel):
    """`{variable, op, reference, measurement}` or `{event}`; true decides the episode."""

    variable: str | None = None
    op: ConditionOp | None = None
    reference: int = 0
    measurement: Literal["absolute", "delta"] = "absolute"
    event: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Condition:
        if (self.variable is None) == (self.event is None):
            raise ValueError("a condition needs exactly one of 'variable' or 'event'")
        if self.variable is not None and self.op is None:
            raise ValueError(f"condition on {self.variable!r} needs an 'op'")
        comparison = self.variable is not None and self.op in COMPARISON_OPS
        if comparison and "reference" not in self.model_fields_set:
            raise ValueError(
                f"op {self.op!r} compares {self.variable!r} with 'reference', which is missing; "
                f"expected an integer reference, such as {{variable: {self.variable}, "
                f"op: {self.op}, reference: 10}} (zero, nonzero, positive and negative need none)"
            )
        return self


class EpisodeSpec(StrictModel):
    win: list[Condition] = Field(default_factory=list)
    loss: list[Condition] = Field(default_factory=list)


class GameSpec(StrictModel):
    """A whole game definition file."""

    STEP_KINDS: ClassVar[dict[str, type[StrictModel]]] = _STEP_KINDS

    name: str = Field(min_length=1)
    description: str = ""
    machine: Literal["48k", "128k"] = "48k"
    snapshot: str
    play_area: PlayArea = PlayArea()
    frame_skip: int = Field(4, ge=1, le=100)
    max_episode_steps: int = Field(5000, ge=1)
    data: dict[str, DataVariable] = Field(default_factory=dict)
    routines: dict[str, Address] = Field(default_factory=dict)
    start: list[StartStep] = Field(default_factory=list)
    actions: list[list[KeyName]] = Field(min_length=1)
    reward: RewardSpec = RewardSpec()
    episode: EpisodeSpec = EpisodeSpec()

    @field_validator("routines")
    @classmethod
    def _routine_addresses(cls, routines: dict[str, int]) -> dict[str, int]:
        for name, address in routines.items():
            if not 0 <= address <= 0xFFFF:
                raise ValueError(
                    f"routine {name!r} address {address:#x} is out of range; expected 0x0000-0xFFFF"
                )
        return routines

    @field_validator("start", mode="before")
    @classmethod
    def _step_kinds(cls, steps: Any) -> Any:
        if not isinstance(steps, list):
            return steps
        parsed = []
        for n, step in enumerate(steps):
            if not isinstance(step, dict):
                raise ValueError(f"step {n} must be a mapping such as {{wait: 50}}")
            kinds = [k for k in step if k in _STEP_KINDS]
            if len(kinds) != 1:
                raise ValueError(
                    f"step {n} must have exactly one of {', '.join(_STEP_KINDS)}; got "
                    f"{', '.join(map(str, step)) or 'nothing'}"
                )
            try:
                parsed.append(_STEP_KINDS[kinds[0]].model_validate(step))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ValueError(
                    f"step {n} ({kinds[0]}){': ' + where if where else ''}: "
                    f"{clean_message(first['msg'])}"
                ) from None
        return parsed


def clean_message(message: str) -> str:
    """Drop pydantic's 'Value error, ' prefix from a message."""
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message
