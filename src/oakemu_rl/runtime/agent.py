"""Agent: the base of actors that choose greedy actions by batched inference."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from .context import RuntimeContext
from .env_lifecycle import EnvironmentState, EnvLifecycle
from .episode_metrics import EpisodeMetrics, EpisodeTotals

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv

C = TypeVar("C")


class Agent(Generic[C]):
    """Owns a multi-env, its per-env states and episode metrics, and batches inference.

    Subclasses queue envs with `_queue_for_inference(env_id, observation)` while they
    handle a batch of results, then call `_flush_pending_inference()` once: one forward
    pass of the inference model for every queued env, after which
    `_on_inference_complete(env_id, action)` is called for each of them. The hooks
    `_before_inference_flush` and `_after_inference_flush` run around the pass.
    """

    def __init__(
        self,
        context: RuntimeContext[C],
        inference_model: nn.Module,
        num_envs: int,
        env_factory: Callable[[], OakEmuMultiEnv] | None = None,
        *,
        stream: str = "actor",
    ) -> None:
        self.context = context
        self._inference_model = inference_model
        self._env_factory = env_factory
        self._env: OakEmuMultiEnv | None = None
        self.lifecycle = EnvLifecycle(num_envs, context.seed, stream)
        self.episode_metrics = EpisodeMetrics()
        self._steps = 0
        self._pending_ids: list[int] = []
        self._pending_obs: npt.NDArray[Any] | None = None

    # -- env ----------------------------------------------------------------------

    def _default_env_factory(self) -> OakEmuMultiEnv:
        raise NotImplementedError(f"{type(self).__name__} needs an env_factory")

    def _open_env(self) -> OakEmuMultiEnv:
        """Create the multi-env (once)."""
        if self._env is None:
            factory = self._env_factory or self._default_env_factory
            env = factory()
            if env.num_envs != self.lifecycle.num_envs:
                env.close()
                raise ValueError(
                    f"the env factory made {env.num_envs} envs; expected {self.lifecycle.num_envs}"
                )
            self._env = env
        return self._env

    def _close_env(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    @property
    def env(self) -> OakEmuMultiEnv | None:
        """The multi-env, once opened."""
        return self._env

    @property
    def result_queue_depth(self) -> int:
        """The current depth of the env result queue (0 before the env is open)."""
        return int(self._env.result_queue_depth) if self._env is not None else 0

    @property
    def env_states(self) -> list[EnvironmentState]:
        return self.lifecycle.states

    # -- batched inference ------------------------------------------------------------

    def _queue_for_inference(self, env_id: int, observation: npt.NDArray[Any]) -> None:
        """Queue an env and its observation for the next batched inference pass."""
        if self._pending_obs is None or self._pending_obs.shape[1:] != observation.shape:
            self._pending_obs = np.empty(
                (self.lifecycle.num_envs, *observation.shape), dtype=observation.dtype
            )
        self._pending_obs[len(self._pending_ids)] = observation
        self._pending_ids.append(env_id)

    @property
    def pending_inference_count(self) -> int:
        return len(self._pending_ids)

    def _flush_pending_inference(self) -> None:
        """Run one forward pass for every queued env and hand out the actions."""
        count = len(self._pending_ids)
        if count == 0:
            return
        assert self._pending_obs is not None
        self._before_inference_flush(count)
        batch = torch.from_numpy(self._pending_obs[:count]).to(self.context.device)
        with torch.inference_mode():
            actions = self._greedy_actions(self._inference_model(batch))
        ids, self._pending_ids = self._pending_ids, []
        env = self._env
        with env.batch() if env is not None else contextlib.nullcontext():
            # The batch's actions go out as one message per worker.
            for env_id, action in zip(ids, actions.tolist(), strict=True):
                self._on_inference_complete(env_id, int(action))
        self._after_inference_flush()

    def _greedy_actions(self, q_values: torch.Tensor) -> npt.NDArray[np.int64]:
        """Greedy actions from the model's output (override to mask actions)."""
        return q_values.argmax(dim=1).cpu().numpy()

    def _before_inference_flush(self, count: int) -> None:
        """Called before a batched inference pass of `count` envs."""

    def _on_inference_complete(self, env_id: int, action: int) -> None:
        """Called with each action of a batched inference pass."""
        raise NotImplementedError

    def _after_inference_flush(self) -> None:
        """Called after a batched inference pass."""

    # -- counters -----------------------------------------------------------------------

    @property
    def steps(self) -> int:
        """Total environment steps taken."""
        return self._steps

    @property
    def total_episodes(self) -> int:
        return self.episode_metrics.totals.total_episodes

    @property
    def total_wins(self) -> int:
        return self.episode_metrics.totals.total_wins

    @property
    def total_losses(self) -> int:
        return self.episode_metrics.totals.total_losses

    @property
    def total_truncated(self) -> int:
        return self.episode_metrics.totals.total_truncated

    def restore_state(self, state: EpisodeTotals) -> None:
        """Restore the episode totals (wins, losses, truncations, episodes)."""
        self.episode_metrics.restore_totals(state)
