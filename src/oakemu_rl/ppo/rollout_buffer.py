"""RolloutBuffer: time-major PPO storage, one column of `num_steps` per env, and GAE.

Envs finish their steps in any order (there is no lockstep), so each env fills its
own column: `add_action` stores the observation, action, log-probability and value
at the env's next free row, `add_outcome` the reward and episode end of that step.
A column is full after `num_steps` outcomes; the env then waits (its next step is not
submitted) until every column is full and the learner has trained on the rollout and
released it. The actor records, for each full column, the value of the observation
that follows the column (`set_last_value`), from which GAE bootstraps.

Episode ends: a terminated step bootstraps nothing (its next value is 0); a truncated
step (a time limit, a lost worker) bootstraps from the value of its final observation
(`set_truncation_value`), as if the episode went on. Both cut the GAE chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch

__all__ = ["RolloutBatch", "RolloutBuffer", "compute_gae"]

FloatArray = npt.NDArray[np.float32]


class RolloutBatch(NamedTuple):
    """A minibatch of flattened rollout data, as tensors."""

    observations: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


def compute_gae(
    rewards: FloatArray,
    values: FloatArray,
    terminated: npt.NDArray[np.bool_],
    truncated: npt.NDArray[np.bool_],
    truncation_values: FloatArray,
    last_values: FloatArray,
    gamma: float,
    gae_lambda: float,
) -> tuple[FloatArray, FloatArray]:
    """GAE(lambda) advantages and returns for time-major (T, N) arrays.

    The value after step t is `values[t + 1]` (`last_values` after the last row),
    `truncation_values[t]` when step t was truncated, and 0 when it terminated.
    Returns (advantages, returns), where returns = advantages + values.
    """
    num_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    last_gae = np.zeros(rewards.shape[1:], dtype=np.float32)
    for t in reversed(range(num_steps)):
        next_values = last_values if t == num_steps - 1 else values[t + 1]
        next_values = np.where(truncated[t], truncation_values[t], next_values)
        next_values = np.where(terminated[t], 0.0, next_values)
        continues = 1.0 - (terminated[t] | truncated[t]).astype(np.float32)
        delta = rewards[t] + gamma * next_values - values[t]
        last_gae = delta + gamma * gae_lambda * continues * last_gae
        advantages[t] = last_gae
    returns = (advantages + values).astype(np.float32)
    return advantages.astype(np.float32), returns


class RolloutBuffer:
    """Per-env, time-major storage of one PPO rollout.

    Args:
        num_steps: rows per env (the rollout length T).
        num_envs: columns (N).
        observation_shape: shape of one observation.
        observation_dtype: dtype observations are stored in (the env's).
        device: where minibatch tensors are put.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        observation_shape: tuple[int, ...],
        observation_dtype: Any = np.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        if num_steps < 1 or num_envs < 1:
            raise ValueError(f"need num_steps >= 1 and num_envs >= 1; got {num_steps}, {num_envs}")
        self.num_steps = num_steps
        self.num_envs = num_envs
        self.observation_shape = tuple(observation_shape)
        self.device = torch.device(device)
        shape = (num_steps, num_envs)
        self.observations = np.zeros((*shape, *self.observation_shape), dtype=observation_dtype)
        self.actions = np.zeros(shape, dtype=np.int64)
        self.log_probs = np.zeros(shape, dtype=np.float32)
        self.values = np.zeros(shape, dtype=np.float32)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.terminated = np.zeros(shape, dtype=np.bool_)
        self.truncated = np.zeros(shape, dtype=np.bool_)
        self.truncation_values = np.zeros(shape, dtype=np.float32)
        self.last_values = np.zeros(num_envs, dtype=np.float32)
        self.advantages = np.zeros(shape, dtype=np.float32)
        self.returns = np.zeros(shape, dtype=np.float32)
        self.positions = np.zeros(num_envs, dtype=np.int64)
        self._acted = np.zeros(num_envs, dtype=np.bool_)
        self.computed = False
        #: The actor's step count when it handed this rollout over (None before).
        self.end_step: int | None = None
        self._flat: tuple[torch.Tensor, ...] | None = None

    def empty_like(self) -> RolloutBuffer:
        """A new, empty buffer of the same geometry, dtype and device."""
        return RolloutBuffer(
            self.num_steps,
            self.num_envs,
            self.observation_shape,
            self.observations.dtype,
            self.device,
        )

    # -- filling ------------------------------------------------------------------------

    def column_full(self, env_id: int) -> bool:
        """Whether env `env_id` has filled its column."""
        return bool(self.positions[env_id] >= self.num_steps)

    @property
    def full(self) -> bool:
        """Whether every column is full (the rollout is ready for the learner)."""
        return bool((self.positions >= self.num_steps).all())

    @property
    def size(self) -> int:
        """Steps stored so far, over all columns."""
        return int(self.positions.sum())

    def add_action(
        self,
        env_id: int,
        observation: npt.NDArray[Any],
        action: int,
        log_prob: float,
        value: float,
    ) -> None:
        """Store the observation an action was chosen for, the action, its log-prob and value."""
        t = int(self.positions[env_id])
        if t >= self.num_steps:
            raise RuntimeError(f"env {env_id}'s column is full; wait for the learner")
        if self._acted[env_id]:
            raise RuntimeError(f"env {env_id} has an action without an outcome")
        self.observations[t, env_id] = observation
        self.actions[t, env_id] = action
        self.log_probs[t, env_id] = log_prob
        self.values[t, env_id] = value
        self._acted[env_id] = True

    def add_outcome(self, env_id: int, reward: float, terminated: bool, truncated: bool) -> int:
        """Store the reward and episode end of the step of env `env_id`; returns its row."""
        if not self._acted[env_id]:
            raise RuntimeError(f"env {env_id} has an outcome without an action")
        t = int(self.positions[env_id])
        self.rewards[t, env_id] = reward
        self.terminated[t, env_id] = terminated
        self.truncated[t, env_id] = truncated and not terminated
        self.truncation_values[t, env_id] = 0.0
        self.positions[env_id] = t + 1
        self._acted[env_id] = False
        self.computed = False
        return t

    def has_pending_action(self, env_id: int) -> bool:
        """Whether env `env_id` has an action stored whose outcome has not come."""
        return bool(self._acted[env_id])

    def discard_pending_action(self, env_id: int) -> None:
        """Forget an action whose step will never complete (its env was lost)."""
        self._acted[env_id] = False

    def truncate_last(self, env_id: int) -> int | None:
        """Mark env `env_id`'s last stored step as truncated (its episode was cut off);
        returns its row, or None when the column is empty or that step already ended."""
        t = int(self.positions[env_id]) - 1
        if t < 0 or self.terminated[t, env_id] or self.truncated[t, env_id]:
            return None
        self.truncated[t, env_id] = True
        self.computed = False
        return t

    def set_truncation_value(self, env_id: int, row: int, value: float) -> None:
        """The value of the final observation of a truncated step."""
        self.truncation_values[row, env_id] = value
        self.computed = False

    def set_last_value(self, env_id: int, value: float) -> None:
        """The value of the observation after env `env_id`'s full column."""
        self.last_values[env_id] = value
        self.computed = False

    def reset(self) -> None:
        """Empty every column (after the learner has trained on the rollout)."""
        self.positions[:] = 0
        self._acted[:] = False
        self.terminated[:] = False
        self.truncated[:] = False
        self.truncation_values[:] = 0.0
        self.last_values[:] = 0.0
        self.computed = False
        self.end_step = None

    # -- learning -----------------------------------------------------------------------

    def compute_returns_and_advantages(self, gamma: float, gae_lambda: float) -> None:
        """GAE(lambda) advantages and returns of the full rollout."""
        if not self.full:
            raise RuntimeError(
                f"the rollout is not full: columns hold {self.positions.tolist()} of "
                f"{self.num_steps} steps"
            )
        self.advantages, self.returns = compute_gae(
            self.rewards,
            self.values,
            self.terminated,
            self.truncated,
            self.truncation_values,
            self.last_values,
            gamma,
            gae_lambda,
        )
        self._flat = None
        self.computed = True

    def minibatches(
        self, num_minibatches: int, generator: torch.Generator | None = None
    ) -> Iterator[RolloutBatch]:
        """The rollout, shuffled and split into `num_minibatches` minibatches (one epoch)."""
        if not self.computed:
            raise RuntimeError("call compute_returns_and_advantages first")
        total = self.num_steps * self.num_envs
        device = self.device
        if self._flat is None:
            self._flat = self._flat_tensors()
        flat = self._flat
        order = torch.randperm(total, generator=generator).to(device)
        size = total // num_minibatches
        for i in range(num_minibatches):
            end = total if i == num_minibatches - 1 else (i + 1) * size
            index = order[i * size : end]
            yield RolloutBatch(*(tensor[index] for tensor in flat))

    def _flat_tensors(self) -> tuple[torch.Tensor, ...]:
        total = self.num_steps * self.num_envs
        device = self.device
        arrays = (
            self.observations.reshape(total, *self.observation_shape),
            self.actions.reshape(total),
            self.log_probs.reshape(total),
            self.values.reshape(total),
            self.advantages.reshape(total),
            self.returns.reshape(total),
        )
        return tuple(torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in arrays)
