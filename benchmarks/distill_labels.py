"""A distill run's aggregated labels, read back from its newest checkpoint for offline fits
(`distill_replay.py`, `distill_mirror.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from oakemu_rl.distill import DATASET_FILE
from oakemu_rl.distill.config import DistillExperimentConfiguration
from oakemu_rl.envs.observation import ObservationPipeline
from oakemu_rl.experiments.evaluation import find_checkpoint, read_checkpoint_config
from oakemu_rl.games.loader import GameDefinition, load_game


@dataclass
class RunLabels:
    """The labelled states of a run, in the order they came, with its configuration."""

    config: DistillExperimentConfiguration
    game: GameDefinition
    saved: dict[str, Any]
    shape: tuple[int, ...]

    @property
    def targets(self) -> npt.NDArray[np.float32]:
        return np.asarray(self.saved["targets"])

    @property
    def held_out(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.saved["held_out"])

    @property
    def critical(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.saved["critical"])

    def observations(self, rows: npt.NDArray[np.int64]) -> torch.Tensor:
        """The stored observations of `rows`, as the env gave them (unpacked 0/255 bits)."""
        if "observation_bits" in self.saved:
            values = int(np.prod(self.shape))
            bits = np.unpackbits(self.saved["observation_bits"][rows], axis=1, count=values)
            return torch.from_numpy(bits.reshape(len(rows), *self.shape) * np.uint8(255))
        return torch.from_numpy(self.saved["observations"][rows])


def load_run_labels(run_dir: Path) -> RunLabels:
    """The labels of the distill run in `run_dir` (exits with a message for another run)."""
    checkpoint = find_checkpoint(run_dir)
    _, config = read_checkpoint_config(checkpoint)
    if not isinstance(config, DistillExperimentConfiguration):
        raise SystemExit(f"{run_dir} is not a distill run")
    game = load_game(config.game)
    shape = tuple(ObservationPipeline(config.env.observation, game).space.shape)
    return RunLabels(config, game, checkpoint.load_numpy(DATASET_FILE), shape)
