"""What every experiment configuration shares: YAML loading, validation errors, overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Self

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from ..envs.worker import WorkerPriority, is_worker_priority


def _check_worker_nice(value: Any) -> Any:
    if is_worker_priority(value):
        return value
    raise ValueError("expected a nice increment 0-19 or 'idle'")


WorkerNice = Annotated[WorkerPriority, BeforeValidator(_check_worker_nice)]
"""The env workers' scheduling priority: a nice increment 0-19, or 'idle' (SCHED_IDLE)."""


class ConfigError(ValueError):
    """A configuration file or value is wrong; the message names the file and the field."""


def format_validation_error(exc: ValidationError, source: str) -> str:
    """One message per problem: `<source>: <field.path>: <message>`."""
    lines = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"] if not str(part).startswith("function-"))
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown setting"
        elif error["type"] == "missing":
            message = "is required"
        elif "input" in error and not isinstance(error["input"], dict):
            message = f"{message} (got {error['input']!r})"
        lines.append(f"{source}: {loc or '<top level>'}: {message}")
    return "\n".join(lines)


class ConfigSection(BaseModel):
    """A section of an experiment configuration: unknown keys are errors, assignments validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ExperimentConfiguration(ConfigSection):
    """Base of `DQNExperimentConfiguration` and `PPOExperimentConfiguration`."""

    @classmethod
    def from_yaml(cls, path: str | Path) -> Self:
        """Load a YAML file; errors name the file and the field."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot be read: {exc}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML: {exc}") from None
        return cls.from_dict(data or {}, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, source: str = "config") -> Self:
        """Validate a mapping; errors name `source` and the field."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping of settings at the top level")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(format_validation_error(exc, source)) from None

    def to_yaml(self) -> str:
        """The full configuration as YAML (every field, defaults included)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)

    def with_overrides(self, **changes: Any) -> Self:
        """A copy with top-level fields changed (validated); None values are ignored."""
        data = self.model_dump(mode="json")
        data.update({k: v for k, v in changes.items() if v is not None})
        return type(self).from_dict(data)
