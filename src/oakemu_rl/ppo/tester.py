"""PPOTester: PPO evaluation episodes on envs of its own (most likely, sampled or random
actions)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch

from ..runtime.context import RuntimeContext
from ..runtime.tester import EvaluationResult, TesterBase, summarise
from ..runtime.thread_safe_model import ThreadSafeModel
from .config import PPOExperimentConfiguration
from .model import PPOModel

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv

__all__ = ["EvaluationResult", "PPOTester", "summarise"]


class PPOTester(TesterBase[PPOExperimentConfiguration]):
    """Plays evaluation episodes with the tester model: the most likely action
    (`tester.deterministic`, the default), a sampled one, or a random one (baseline).

    Takes the arguments of `TesterBase`.
    """

    def __init__(
        self,
        context: RuntimeContext[PPOExperimentConfiguration],
        tester_model: PPOModel,
        learner_model: ThreadSafeModel[PPOModel] | None = None,
        env_factory: Callable[[], OakEmuMultiEnv] | None = None,
        *,
        on_result: Callable[[EvaluationResult], None] | None = None,
    ) -> None:
        super().__init__(context, tester_model, learner_model, env_factory, on_result=on_result)
        config = context.config
        self._deterministic = config.tester.deterministic
        allowed = sorted(set(config.env.allowed_actions or range(tester_model.num_actions)))
        self._allowed = np.array(allowed, dtype=np.int64)

    def _greedy_actions(
        self, q_values: torch.Tensor, rngs: Sequence[np.random.Generator]
    ) -> npt.NDArray[np.int64]:
        logits = q_values
        if self._deterministic:
            return logits.argmax(dim=1).cpu().numpy()
        probs = torch.softmax(logits.double().cpu(), dim=1).numpy()
        # Each env draws from its episode's own generator, so a sampled episode does not
        # depend on which envs shared its batch.
        return np.array([rng.choice(len(p), p=p) for rng, p in zip(rngs, probs, strict=True)])

    def _random_action(self, rng: np.random.Generator) -> int:
        return int(self._allowed[rng.integers(len(self._allowed))])

    def evaluate(
        self,
        episodes: int | None = None,
        *,
        random_policy: bool = False,
        deterministic: bool | None = None,
        step: int = 0,
        max_episode_steps: int | None = None,
    ) -> EvaluationResult:
        """Play `episodes` episodes (default: the configured number) and summarise them."""
        settings = self.config.tester
        self._random_policy = random_policy
        self._deterministic = settings.deterministic if deterministic is None else deterministic
        policy = "greedy" if self._deterministic else "stochastic"
        return self._play(
            episodes or settings.episodes,
            max_episode_steps or settings.max_episode_steps,
            step,
            "random" if random_policy else policy,
        )
