"""A distill run's aggregated labels, read back from its newest checkpoint, and the update
and score of a student fitted on them offline (`distill_replay.py`, `distill_mirror.py`)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from oakemu_rl.distill import DATASET_FILE
from oakemu_rl.distill.actor import safe_choice_rate
from oakemu_rl.distill.config import DistillExperimentConfiguration
from oakemu_rl.distill.dataset import rules_out
from oakemu_rl.distill.loss import soft_cross_entropy
from oakemu_rl.envs.observation import ObservationPipeline
from oakemu_rl.experiments.evaluation import find_checkpoint, read_checkpoint_config
from oakemu_rl.games.loader import GameDefinition, load_game
from oakemu_rl.ppo.model import PPOModel
from oakemu_rl.runtime.weight_average import WeightAverage


class Student(Protocol):
    """What a student is scored by: its most likely action on each row of a batch."""

    def greedy_actions(self, observations: torch.Tensor) -> torch.Tensor: ...


@dataclass
class RunLabels:
    """The labelled states of a run, in the order they came, with its configuration."""

    config: DistillExperimentConfiguration
    game: GameDefinition
    saved: dict[str, Any]
    shape: tuple[int, ...]
    later: float = 0.0
    """The share of the labels, the last ones to come, kept out of training altogether and
    scored apart (`later_safe_rate`): states from episodes the student never trained on,
    where the run's own held-out labels each have near copies a step away among the
    training labels."""

    @property
    def targets(self) -> npt.NDArray[np.float32]:
        return np.asarray(self.saved["targets"])

    @property
    def held_out(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.saved["held_out"])

    @property
    def critical(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.saved["critical"])

    def split(
        self, decisions_only: bool = False
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The training rows, the held-out rows, and the chance of each training row being
        drawn into a minibatch (critical states weighted as the run weights them; with
        `decisions_only`, none for a state whose target allows every action)."""
        earlier = np.arange(len(self.held_out)) < self.cut
        train = np.flatnonzero(~self.held_out & earlier)
        weights = np.where(self.critical[train], self.config.distill.critical_weight, 1.0)
        if decisions_only:
            weights[~rules_out(self.targets[train])] = 0.0
        return train, np.flatnonzero(self.held_out & earlier), weights / weights.sum()

    @property
    def cut(self) -> int:
        """The first of the `later` labels (the number of labels when there are none)."""
        return len(self.held_out) - round(self.later * len(self.held_out))

    def describe(self, run_dir: Path) -> str:
        """`run_dir`, and how many labels it has for training and held out (how many of
        those critical: some action loses a life, another does not)."""
        train, test, _ = self.split()
        critical = int(rules_out(self.targets[test]).sum())
        text = (
            f"{run_dir}: {len(train):,} training labels, {len(test):,} held out "
            f"({critical:,} critical)"
        )
        if self.later:
            later = self.targets[self.cut :]
            text += f", the last {len(later):,} apart ({int(rules_out(later).sum()):,} critical)"
        return text

    def held_out_safe_rate(self, model: Student, run_dir: Path) -> float:
        """`safe_rate` on the held-out rows (exits with a message where none is critical)."""
        safe = self.safe_rate(model, self.split()[1])
        if safe is None:
            raise SystemExit(f"{run_dir}: no held-out critical state")
        return safe

    def later_safe_rate(self, model: Student) -> float:
        """`safe_rate` on the `later` labels (exits with a message where none is critical)."""
        safe = self.safe_rate(model, np.arange(self.cut, len(self.held_out)))
        if safe is None:
            raise SystemExit(f"no critical state among the last {self.later:.0%} of the labels")
        return safe

    def observations(self, rows: npt.NDArray[np.int64]) -> torch.Tensor:
        """The stored observations of `rows`, as the env gave them (unpacked 0/255 bits)."""
        if "observation_bits" in self.saved:
            values = int(np.prod(self.shape))
            bits = np.unpackbits(self.saved["observation_bits"][rows], axis=1, count=values)
            return torch.from_numpy(bits.reshape(len(rows), *self.shape) * np.uint8(255))
        return torch.from_numpy(self.saved["observations"][rows])

    @torch.no_grad()
    def safe_rate(self, model: Student, rows: npt.NDArray[np.int64]) -> float | None:
        """The share of the critical states among `rows` on which `model`'s most likely
        action is safe (`safe_choice_rate`; None: none is critical)."""
        chunks = [rows[i : i + 512] for i in range(0, len(rows), 512)]
        actions = torch.cat([model.greedy_actions(self.observations(c)) for c in chunks])
        return safe_choice_rate(self.targets[rows], actions.numpy())


Augment = Callable[
    [np.random.Generator, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]
]
"""Changes a minibatch (observations, targets) before the update, drawing from the fit's rng."""

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""The student's loss on (logits, targets)."""


class FittedStudent(NamedTuple):
    """What `fit_student` returns: the trained student, the moving averages of its weights
    (by decay) and the seconds spent in the updates themselves."""

    model: PPOModel
    averages: dict[float, PPOModel]
    seconds: float


def fit_student(
    labels: RunLabels,
    config: DistillExperimentConfiguration,
    updates: int,
    seed: int,
    augment: Augment | None = None,
    loss: Loss = soft_cross_entropy,
    every: tuple[int, Callable[[int, PPOModel, dict[float, PPOModel]], None]] | None = None,
    ema: Sequence[float] = (),
    decisions_only: bool = False,
) -> FittedStudent:
    """A fresh student of `config`'s architecture trained on `labels`' training rows with
    the run's loss, optimiser and minibatch size (`RunLabels.split`'s weights), for
    `updates` updates. For each decay d in `ema` it keeps the moving average of the
    trained weights that `distill.ema_decay: d` acts with (`WeightAverage`). `every` = (n,
    f) calls f(updates so far, student, its averages) after every n updates. With
    `decisions_only` minibatches draw only states whose target rules some action out."""
    from oakemu_rl.experiments.distill_experiment import DistillExperiment

    settings = config.distill
    train, _, weights = labels.split(decisions_only)
    targets = torch.from_numpy(labels.targets)
    torch.manual_seed(seed)
    model = DistillExperiment.build_model(config, labels.shape, targets.shape[1])
    optimizer = torch.optim.Adam(model.parameters(), settings.learning_rate, eps=settings.adam_eps)
    rng = np.random.default_rng(seed)
    averaging = {decay: WeightAverage(decay) for decay in ema}
    averages = {decay: copy.deepcopy(model) for decay in ema}
    seconds = 0.0
    for done in range(1, updates + 1):
        batch = rng.choice(train, settings.batch_size, p=weights)
        inputs, wanted = labels.observations(batch), targets[batch]
        if augment is not None:
            inputs, wanted = augment(rng, inputs, wanted)
        started = time.perf_counter()
        update(model, optimizer, inputs, wanted, settings.max_grad_norm, loss)
        for decay, average in averages.items():
            averaging[decay].update(average, model)
        seconds += time.perf_counter() - started
        if every is not None and done % every[0] == 0:
            every[1](done, model, averages)
    return FittedStudent(model, averages, seconds)


def update(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    observations: torch.Tensor,
    targets: torch.Tensor,
    max_grad_norm: float,
    loss_of: Loss = soft_cross_entropy,
) -> None:
    """One step of the run's update: its loss (soft cross-entropy), gradients clipped, Adam."""
    loss = loss_of(model(observations), targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()


def load_run_labels(run_dir: Path, later: float = 0.0) -> RunLabels:
    """The labels of the distill run in `run_dir` (exits with a message for another run),
    the last `later` share of them kept apart (`RunLabels.later`)."""
    checkpoint = find_checkpoint(run_dir)
    _, config = read_checkpoint_config(checkpoint)
    if not isinstance(config, DistillExperimentConfiguration):
        raise SystemExit(f"{run_dir} is not a distill run")
    game = load_game(config.game)
    shape = tuple(ObservationPipeline(config.env.observation, game).space.shape)
    return RunLabels(config, game, checkpoint.load_numpy(DATASET_FILE), shape, later)
