"""The run directory shared by every algorithm: its file names, naming and atomic writes.

A run directory holds the resolved `config.yaml`, TensorBoard events (`tb/`),
checkpoints (`checkpoints/`) and, at the end, `summary.json`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import yaml

from ..runtime.checkpoints import Checkpoint, CheckpointManager
from ..runtime.config_base import ConfigError, ExperimentConfiguration
from ..runtime.metrics import ConsoleSink, MemorySink, MetricsSink, MultiSink, TensorBoardSink

CONFIG_NAME = "config.yaml"
SUMMARY_NAME = "summary.json"


class RunError(RuntimeError):
    """A run cannot start or be resumed (the message says why)."""


def game_key(game: str) -> str:
    """A short name for a game: 'catch', 'CartPole-v1', 'my_game'."""
    if game.startswith("gym:"):
        return game[4:]
    return Path(game).stem


def new_run_dir(game: str, algo: str, run_name: str | None, root: str | Path = "runs") -> Path:
    """runs/<run_name> or runs/<game>-<algo>-<date>-<time>, with -2, -3... if taken."""
    name = run_name or f"{game_key(game)}-{algo}-{time.strftime('%Y%m%d-%H%M%S')}"
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
    path = Path(root) / name
    n = 1
    while path.exists():
        n += 1
        path = Path(root) / f"{name}-{n}"
    return path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a synced temporary file: never a torn file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def jsonable(value: Any) -> Any:
    """`value` with non-finite floats as None (JSON has no NaN or infinity)."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


ConfigT = TypeVar("ConfigT", bound=ExperimentConfiguration)


def read_algo(path: str | Path) -> str:
    """The `algo` of a config YAML, a run directory or a checkpoint directory ('dqn' if unset)."""
    path = Path(path)
    candidate = path if path.is_file() else path / CONFIG_NAME
    if not candidate.is_file():
        raise ConfigError(f"{path}: no config file found (expected {CONFIG_NAME})")
    try:
        data = yaml.safe_load(candidate.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{candidate}: cannot be read: {exc}") from None
    algo = data.get("algo", "dqn") if isinstance(data, dict) else "dqn"
    return str(algo)


def load_run_config(
    run_dir: Path, config_type: type[ConfigT], total_steps: int | None = None
) -> ConfigT:
    """The configuration of the run in `run_dir` (for `--resume`), optionally with a new
    step budget; RunError when `run_dir` is not a run directory."""
    if not run_dir.is_dir():
        raise RunError(f"--resume: {run_dir} is not a directory")
    config_path = run_dir / CONFIG_NAME
    if not config_path.is_file():
        raise RunError(f"--resume: {run_dir} is not a run directory (no {CONFIG_NAME})")
    config = config_type.from_yaml(config_path)
    if total_steps is not None:
        config = config.with_overrides(total_steps=total_steps)
    return config


@dataclass
class OpenedRun:
    """A run directory ready for a run: its checkpoints and where its metrics go."""

    checkpoints: CheckpointManager
    resume_from: Checkpoint | None
    metrics: MultiSink
    console: ConsoleSink | None
    tensorboard_dir: Path


def open_run_directory(
    run_dir: Path,
    config: ExperimentConfiguration,
    *,
    resume: bool,
    show_console: bool,
    memory: MemorySink,
    print_fn: Callable[[str], None],
) -> OpenedRun:
    """Create (or, with `resume`, reopen) `run_dir`: write the resolved config, open the
    checkpoint manager and the metrics sinks (memory, TensorBoard, console)."""
    checkpoints = CheckpointManager(
        run_dir / "checkpoints",
        config.checkpoint.keep_last,
        config.checkpoint.keep_best,
        warn=lambda text: print_fn(f"warning: {text}"),
    )
    checkpoint: Checkpoint | None = None
    if resume:
        for note in checkpoints.recover():
            print_fn(f"checkpoints: {note}")
        checkpoint = checkpoints.latest()
        if checkpoint is None:
            raise RunError(f"--resume: {run_dir} has no valid checkpoint to resume from")
        if checkpoint.step >= config.total_steps:
            raise RunError(
                f"--resume: {run_dir} is at step {checkpoint.step:,} already, and its budget "
                f"is {config.total_steps:,} steps; give --steps above {checkpoint.step:,} to "
                "train further (oakemu-rl evaluate scores it as it is)"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / CONFIG_NAME, config.to_yaml())
    sinks: list[MetricsSink] = [memory]
    tensorboard_dir = run_dir / "tb"
    if config.logging.tensorboard:
        sinks.append(TensorBoardSink(tensorboard_dir))
    console: ConsoleSink | None = None
    if show_console:
        console = ConsoleSink(
            config.total_steps,
            interval=config.logging.console_interval_s,
            initial_step=checkpoint.step if checkpoint else 0,
            time_limit_s=config.max_time_s,
        )
        sinks.append(console)
    return OpenedRun(checkpoints, checkpoint, MultiSink(sinks), console, tensorboard_dir)
