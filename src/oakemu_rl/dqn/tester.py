"""Tester: greedy (or epsilon-greedy) DQN evaluation episodes on envs of its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch

from ..runtime.context import RuntimeContext
from ..runtime.tester import EvaluationResult, TesterBase
from ..runtime.thread_safe_model import ThreadSafeModel
from .action_masker import ActionMasker
from .config import DQNExperimentConfiguration
from .model import DQNModel

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv

__all__ = ["EvaluationResult", "Tester"]


class Tester(TesterBase[DQNExperimentConfiguration]):
    """Plays evaluation episodes with the tester model: greedy, or epsilon-greedy with
    the configured evaluation epsilon (`tester.epsilon`), or random (the baseline).

    Takes the arguments of `TesterBase`.
    """

    def __init__(
        self,
        context: RuntimeContext[DQNExperimentConfiguration],
        tester_model: DQNModel,
        learner_model: ThreadSafeModel[DQNModel] | None = None,
        env_factory: Callable[[], OakEmuMultiEnv] | None = None,
        *,
        on_result: Callable[[EvaluationResult], None] | None = None,
    ) -> None:
        super().__init__(context, tester_model, learner_model, env_factory, on_result=on_result)
        self.action_masker = ActionMasker(
            tester_model.num_actions, context.config.env.allowed_actions
        )
        self._epsilon = context.config.tester.epsilon

    def _greedy_actions(
        self, q_values: torch.Tensor, rngs: Sequence[np.random.Generator]
    ) -> npt.NDArray[np.int64]:
        return self.action_masker.greedy(q_values)

    def _random_action(self, rng: np.random.Generator) -> int:
        return self.action_masker.sample(rng)

    def _explore_action(self, rng: np.random.Generator) -> int | None:
        if self._random_policy or (self._epsilon > 0 and rng.random() < self._epsilon):
            return self._random_action(rng)
        return None

    def evaluate(
        self,
        episodes: int | None = None,
        *,
        random_policy: bool = False,
        epsilon: float | None = None,
        step: int = 0,
        max_episode_steps: int | None = None,
    ) -> EvaluationResult:
        """Play `episodes` episodes (default: the configured number) and summarise them."""
        settings = self.config.tester
        self._random_policy = random_policy
        self._epsilon = settings.epsilon if epsilon is None else epsilon
        return self._play(
            episodes or settings.episodes,
            max_episode_steps or settings.max_episode_steps,
            step,
            "random" if random_policy else "greedy",
        )
