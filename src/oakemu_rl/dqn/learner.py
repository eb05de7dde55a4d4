"""The learner thread: double DQN on replayed n-step transitions, at a held replay ratio."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.nn import functional as F

from ..runtime.context import RuntimeContext
from ..runtime.rollback import RollbackController
from ..runtime.thread_safe_model import ThreadSafeModel
from .action_masker import ActionMasker
from .batch_prefetcher import BatchPrefetcher, PreparedBatch, TargetNetwork, autocast
from .config import DQNExperimentConfiguration
from .model import DQNModel
from .replay_buffer import ReplayBuffer


@torch.no_grad()
def clip_grad_norm(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """`torch.nn.utils.clip_grad_norm_` (L2, one device and dtype) on a list of gradients
    resolved once: the same operators, so the same result bit for bit, without the
    per-call grouping by device and dtype. Returns the total norm before clipping."""
    total: torch.Tensor = torch.linalg.vector_norm(
        torch.stack(torch._foreach_norm(grads, 2.0)), 2.0
    )
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))
    return total


class ReplayRatioGate:
    """Holds learner updates at `ratio` per env step after `learning_starts` steps.

    The learner waits while it is at or ahead of `ratio * (steps - learning_starts)`;
    the actor waits while the learner is more than `max_lag` updates behind.
    """

    def __init__(self, ratio: float, learning_starts: int, max_lag: int) -> None:
        self.ratio = ratio
        self.learning_starts = learning_starts
        self.max_lag = max_lag
        self._cond = threading.Condition()
        self._env_steps = 0
        self._updates = 0
        self.base_updates = 0
        self.enforce_lag = True
        self.actor_wait_s = 0.0

    def target_updates(self, env_steps: int) -> int:
        """Updates due after `env_steps` env steps."""
        return self.base_updates + max(0, int((env_steps - self.learning_starts) * self.ratio))

    def rebase(self, updates: int, learning_starts: int) -> None:
        """From now on: `updates` done, and the next ones due from `learning_starts` on."""
        with self._cond:
            self.base_updates = updates
            self.learning_starts = learning_starts
            self._cond.notify_all()

    @property
    def env_steps(self) -> int:
        return self._env_steps

    @property
    def updates(self) -> int:
        return self._updates

    def set_env_steps(self, steps: int) -> None:
        with self._cond:
            self._env_steps = steps
            self._cond.notify_all()

    def set_updates(self, updates: int) -> None:
        with self._cond:
            self._updates = updates
            self._cond.notify_all()

    def learner_wait(self, stop: threading.Event, timeout: float = 0.1) -> bool:
        """Wait until an update is due; False if `stop` was set or `timeout` passed first."""
        with self._cond:
            if self._updates < self.target_updates(self._env_steps):
                return True
            if stop.is_set():
                return False
            self._cond.wait(timeout)
            return self._updates < self.target_updates(self._env_steps)

    def record_update(self) -> None:
        with self._cond:
            self._updates += 1
            self._cond.notify_all()

    def actor_wait(self, stop: threading.Event) -> None:
        """Block the actor while the learner lags more than `max_lag` updates."""
        if not self.enforce_lag:
            return
        with self._cond:
            start = None
            while (
                self.enforce_lag
                and not stop.is_set()
                and self.target_updates(self._env_steps) - self._updates > self.max_lag
            ):
                start = start or time.monotonic()
                self._cond.wait(0.05)
            if start is not None:
                self.actor_wait_s += time.monotonic() - start

    def wait_until_caught_up(self, stop: threading.Event, timeout: float = 60.0) -> bool:
        """Wait until the learner has made every update due at the current env steps."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._updates < self.target_updates(self._env_steps):
                remaining = deadline - time.monotonic()
                if stop.is_set() or not self.enforce_lag or remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.05))
        return True

    def release_actor(self) -> None:
        """Stop holding the actor back (the learner has stopped)."""
        with self._cond:
            self.enforce_lag = False
            self._cond.notify_all()


class Learner:
    """Trains the learner model from the replay buffer on its own thread.

    Each update samples a batch, computes double-DQN n-step targets with the target
    network, takes an Adam step on the Huber loss (importance-weighted under
    prioritized replay) with gradient-norm clipping, updates priorities and
    publishes the weights through the ThreadSafeModel.
    """

    def __init__(
        self,
        context: RuntimeContext[DQNExperimentConfiguration],
        learner_model: ThreadSafeModel[DQNModel],
        target_model: DQNModel,
        optimizer: torch.optim.Optimizer,
        replay_buffer: Callable[[], ReplayBuffer],
        gate: ReplayRatioGate,
        action_masker: ActionMasker,
        env_steps: Callable[[], int],
    ) -> None:
        self.context = context
        self.config = context.config.learner
        self.learner_model = learner_model
        self.model = learner_model.model
        self.target_model = target_model
        self.optimizer = optimizer
        self._replay_buffer = replay_buffer
        self.gate = gate
        self.action_masker = action_masker
        self._env_steps = env_steps
        self.rng = context.spawn_rng("learner")
        self.updates = 0
        self._thread: threading.Thread | None = None
        self._hold = threading.Lock()
        self.rollback: RollbackController | None = None
        self._metrics: dict[str, list[float]] = {"loss": [], "q": [], "td": [], "update_s": []}
        self._rate_mark = (time.monotonic(), 0)
        self.last_metrics: dict[str, float] = {}
        self.target_model.requires_grad_(False)
        self._parameters = [p for p in self.model.parameters() if p.requires_grad]
        self.bf16 = self.config.precision == "bf16"
        self.prioritized = context.config.replay.prioritized
        self.target = TargetNetwork(target_model, bf16=self.bf16)
        self.target.load(self.model.state_dict())
        self.prefetcher = BatchPrefetcher(
            context,
            replay_buffer,
            self.rng,
            self.config.batch_size,
            self.target,
            # A Polyak target changes at every update, a noisy one at every noise draw.
            precompute_target=self.config.target.type == "hard" and not self.model.noisy,
            memory_format=self.model.input_memory_format,
        )

    # -- one update -----------------------------------------------------------------------

    def beta(self, step: int) -> float:
        """The importance-weight exponent at env step `step`."""
        replay = self.context.config.replay
        horizon = replay.beta_steps or self.context.config.total_steps
        return min(1.0, replay.beta_start + (1.0 - replay.beta_start) * step / max(1, horizon))

    def update(self) -> dict[str, float]:
        """One gradient step; returns the loss, mean Q and mean |TD error|."""
        cfg = self.config
        prepared = self.prefetcher.take(self.beta(self._env_steps()))
        if self.split_enabled and prepared.observations.shape[0] >= 2:
            return self._split_update(prepared)
        obs, actions = prepared.observations, prepared.actions
        next_obs, weights = prepared.next_observations, prepared.weights

        device = obs.device
        online_next: Future[torch.Tensor] | None = None
        if cfg.double_dqn and self.prefetch_enabled:
            # Same weights, read only: the prefetch thread computes the next observations'
            # online Q values while this thread runs the forward pass that needs gradients.
            online_next = self.prefetcher.submit(lambda: self._online_q_values(next_obs))
        with autocast(device, self.bf16):
            q_values = self.model(obs).float()
        q_taken = q_values.gather(1, actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            target_q = prepared.target_q
            if target_q is None or prepared.target_version != self.target.version:
                target_q, _ = self.target.q_values(next_obs)
            if cfg.double_dqn:
                online_q = (
                    online_next.result()
                    if online_next is not None
                    else self._online_q_values(next_obs)
                )
                next_actions = self.action_masker.mask(online_q).argmax(dim=1)
            else:
                next_actions = self.action_masker.mask(target_q).argmax(dim=1)
            next_q = target_q.gather(1, next_actions.unsqueeze(1)).squeeze(1)
            targets = prepared.returns + prepared.discounts * next_q
            td = (q_taken - targets).cpu().numpy()
        batch = prepared.batch
        self._replay_buffer().update_priorities(batch.indices, td, batch.generations)
        if self.prefetch_enabled:
            # The next batch's sampling needs these priorities, not the new weights:
            # it is prepared while this one's backward pass and optimizer step run.
            self.prefetcher.request(self.beta(self._env_steps()))
        loss = (
            weights * F.huber_loss(q_taken, targets, reduction="none", delta=cfg.huber_delta)
        ).mean()

        self._zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        return self._step(float(loss.detach()), q_taken.detach(), td)

    def _zero_grad(self) -> None:
        """`optimizer.zero_grad(set_to_none=True)` over the model's parameters, without the
        optimizer's per-call bookkeeping (it is on the learner's critical path)."""
        for parameter in self._parameters:
            parameter.grad = None

    def _step(self, loss: float, q_taken: torch.Tensor, td: npt.NDArray[Any]) -> dict[str, float]:
        """Clip the gradients, take the optimizer step, update the target; the metrics."""
        grads = [p.grad for p in self._parameters if p.grad is not None]
        if grads:
            clip_grad_norm(grads, self.config.max_grad_norm)
        with self.learner_model.update():
            self.optimizer.step()
        self.updates += 1
        self._update_target()
        if self.model.noisy:
            self.model.reset_noise()
            self.target_model.reset_noise()
        return {"loss": loss, "q": float(q_taken.mean()), "td": float(np.abs(td).mean())}

    def _split_update(self, prepared: PreparedBatch) -> dict[str, float]:
        """One gradient step with the batch's forward and backward passes split between
        this thread and the prefetch thread; their gradients add up in `.grad`.

        The prefetch thread also prepares the next batch, so it takes the smaller part.
        With two parts the sum is the same in either order (float addition commutes),
        so runs are reproducible; it differs from one pass over the whole batch only in
        the order of the sums inside each part.
        """
        size = prepared.observations.shape[0]
        cut = size - max(1, (size * 3) // 8)
        if prepared.target_q is None or prepared.target_version != self.target.version:
            prepared.target_q, prepared.target_version = self.target.q_values(
                prepared.next_observations
            )
        if not self.prioritized:
            # Uniform sampling does not read priorities: prepare the next batch now.
            self.prefetcher.request(self.beta(self._env_steps()))
        self._zero_grad()
        other = self.prefetcher.submit(lambda: self._part(prepared, cut, size, size))
        mine = self._part(prepared, 0, cut, size)
        theirs = other.result()
        q_taken = torch.cat([mine[0], theirs[0]])
        td = torch.cat([mine[1], theirs[1]]).cpu().numpy()
        batch = prepared.batch
        self._replay_buffer().update_priorities(batch.indices, td, batch.generations)
        if self.prioritized:
            self.prefetcher.request(self.beta(self._env_steps()))
        return self._step(mine[2] + theirs[2], q_taken, td)

    def _part(
        self, prepared: PreparedBatch, start: int, stop: int, size: int
    ) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Forward and backward pass over `prepared[start:stop]`, its loss weighted as a
        share of a batch of `size`; returns the part's Q values taken, TD errors and loss."""
        cfg = self.config
        part = slice(start, stop)
        obs = prepared.observations[part]
        actions = prepared.actions[part]
        with autocast(obs.device, self.bf16):
            q_values = self.model(obs).float()
        q_taken = q_values.gather(1, actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            assert prepared.target_q is not None
            target_q = prepared.target_q[part]
            if cfg.double_dqn:
                online_q = self._online_q_values(prepared.next_observations[part])
                next_actions = self.action_masker.mask(online_q).argmax(dim=1)
            else:
                next_actions = self.action_masker.mask(target_q).argmax(dim=1)
            next_q = target_q.gather(1, next_actions.unsqueeze(1)).squeeze(1)
            targets = prepared.returns[part] + prepared.discounts[part] * next_q
        losses = F.huber_loss(q_taken, targets, reduction="none", delta=cfg.huber_delta)
        loss = (prepared.weights[part] * losses).sum() / size
        loss.backward()  # type: ignore[no-untyped-call]
        return q_taken.detach(), (q_taken - targets).detach(), float(loss.detach())

    @torch.no_grad()
    def _online_q_values(self, observations: torch.Tensor) -> torch.Tensor:
        with autocast(observations.device, self.bf16):
            q_values: torch.Tensor = self.model(observations).float()
        return q_values

    @torch.no_grad()
    def _update_target(self) -> None:
        target = self.config.target
        if target.type == "hard":
            if self.updates % target.period == 0:
                self.target.load(self.model.state_dict())
        else:
            self.target.blend(list(self.model.parameters()), target.tau)

    # -- thread ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the learner thread (and the batch prefetch thread, when enabled)."""
        if self._thread is None:
            if self.prefetch_enabled:
                self.prefetcher.start()
            self._thread = threading.Thread(target=self._run, name="learner", daemon=True)
            self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def prefetch_enabled(self) -> bool:
        """Whether the next batch is prepared on the prefetch thread."""
        return self.config.prefetch

    @property
    def split_enabled(self) -> bool:
        """Whether each batch's passes are split with the (running) prefetch thread."""
        return self.config.prefetch and self.config.split_batch and self.prefetcher.running

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        stop = self.context.stop_event
        self.context.enter_thread(self.config.threads or None)
        try:
            while not stop.is_set():
                if not self.gate.learner_wait(stop):
                    continue
                with self._hold:
                    if len(self._replay_buffer()) < self.config.batch_size:
                        time.sleep(0.01)
                        continue
                    started = time.perf_counter()
                    metrics = self.update()
                    metrics["update_s"] = time.perf_counter() - started
                if self.rollback is not None:
                    # A non-finite loss: the controller restores the best checkpoint.
                    if self.rollback.check_loss(metrics["loss"], self._env_steps()):
                        continue
                    self.rollback.note_healthy_updates(1)
                self.gate.record_update()
                for key, value in metrics.items():
                    self._metrics[key].append(value)
                if self.updates % self.config.log_every_updates == 0:
                    self._log()
        except BaseException as exc:
            self.context.report_error(exc)
        finally:
            self.prefetcher.close()
            self.gate.release_actor()

    def _log(self) -> None:
        now, (mark_time, mark_updates) = time.monotonic(), self._rate_mark
        self._rate_mark = (now, self.updates)
        step = self._env_steps()
        values = {
            "train/loss": float(np.mean(self._metrics["loss"])),
            "train/mean_q": float(np.mean(self._metrics["q"])),
            "train/td_error": float(np.mean(self._metrics["td"])),
            "train/updates": float(self.updates),
            "train/beta": self.beta(step),
            "perf/updates_per_s": (self.updates - mark_updates) / max(1e-9, now - mark_time),
            "perf/update_ms": 1e3 * float(np.mean(self._metrics["update_s"])),
        }
        if self.context.config.replay.prioritized:
            values["replay/max_priority"] = self._replay_buffer().max_priority
        for key in self._metrics:
            self._metrics[key].clear()
        self.last_metrics = values
        for name, value in values.items():
            self.context.metrics.scalar(name, value, step)

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Keep the learner between updates while the block runs (for checkpoints,
        rollbacks and replay swaps). A batch sampled ahead is dropped first, so the
        sampling RNG is where it would be without prefetching."""
        with self._hold:
            self.prefetcher.cancel()
            yield

    # -- state ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Counters, target network and sampling RNG (model and optimizer are saved apart)."""
        return {
            "updates": self.updates,
            "target_model": {
                k: v.detach().clone() for k, v in self.target_model.state_dict().items()
            },
            "rng": dict(self.rng.bit_generator.state),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.updates = int(state["updates"])
        self.prefetcher.cancel()
        self.target.load(state["target_model"])
        self.rng.bit_generator.state = state["rng"]
        self.gate.set_updates(self.updates)
