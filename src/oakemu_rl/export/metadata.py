"""The metadata inside an exported policy file: what it plays and how it sees.

Stored as ONNX ``metadata_props`` (string keys and values; structured values as JSON),
readable with onnxruntime alone (``session.get_modelmeta().custom_metadata_map``):

- ``oakemu_rl.format``: this layout's version (1);
- ``game``: the game as given to training (a bundled name, a YAML path, or ``gym:<id>``);
- ``game_name`` and ``game_yaml_sha256``: the game's name and the sha256 of its YAML
  (none for a Gymnasium env);
- ``actions``: the action set, each action the key names held together
  (``[[], ["O"], ["P"]]``), and ``allowed_actions`` (null: all of them);
- ``observation``: ``kind`` (screen, attributes, ram, or gym), the play area, the size
  (height, width), grayscale, frame stack, the array ``shape`` and ``dtype``: the
  observation settings to play the policy with;
- ``algo``, ``checkpoint_step`` and ``max_episode_steps`` (evaluation's episode cut).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

FORMAT_VERSION = 1
PREFIX = "oakemu_rl."


class PolicyFileError(ValueError):
    """A policy file is not an OakEmu-RL export, or does not suit the game given."""


@dataclass(frozen=True)
class PolicyMetadata:
    """What an exported policy plays and how it sees."""

    format: int
    game: str
    game_name: str
    game_yaml_sha256: str | None
    actions: list[list[str]]
    allowed_actions: list[int] | None
    observation: dict[str, Any]
    algo: str
    checkpoint_step: int
    max_episode_steps: int

    def to_props(self) -> dict[str, str]:
        """ONNX metadata_props: every field as JSON, under the `oakemu_rl.` prefix."""
        return {PREFIX + key: json.dumps(value) for key, value in asdict(self).items()}

    @classmethod
    def from_props(cls, props: dict[str, str], source: str) -> PolicyMetadata:
        """Read the metadata of a policy file (`source` names it in errors)."""
        try:
            version = json.loads(props[PREFIX + "format"])
        except (KeyError, ValueError):
            raise PolicyFileError(
                f"{source}: not an OakEmu-RL policy (no {PREFIX}format metadata); export one "
                "with oakemu-rl export"
            ) from None
        if version != FORMAT_VERSION:
            raise PolicyFileError(
                f"{source}: policy format {version}, this version reads {FORMAT_VERSION}"
            )
        fields = cls.__dataclass_fields__
        try:
            return cls(**{key: json.loads(props[PREFIX + key]) for key in fields})
        except (KeyError, ValueError, TypeError) as exc:
            raise PolicyFileError(f"{source}: incomplete policy metadata ({exc})") from None
