"""The DQN learner thread: TD updates on replayed n-step transitions, at the replay ratio
(with demonstrations, DQfD's large-margin loss on the demonstration rows too; in a run
started from a distilled student, the same loss towards the student's actions on the
agent's rows, with a weight that decays: `StudentAnchor`; with `shrink_perturb`, the
online network shrunk towards a fresh initialisation every so many updates)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from ..runtime.context import RuntimeContext
from ..runtime.learner_thread import LearnerThread
from ..runtime.replay_ratio_gate import ReplayRatioGate
from ..runtime.rollback import TrainingMonitor
from ..runtime.shrink_perturb import shrink_if_due
from ..runtime.thread_safe_model import ThreadSafeModel
from .action_masker import ActionMasker
from .batch_prefetcher import BatchPrefetcher, TargetNetwork, autocast
from .config import DQNExperimentConfiguration
from .demo_replay import large_margin_loss
from .model import DQNModel
from .replay_buffer import ReplayBuffer
from .td_loss import td_loss


class Learner(LearnerThread):
    """Trains the learner model from the replay buffer on its own thread.

    Consumes batches of n-step transitions (prepared one ahead by the `BatchPrefetcher`)
    at the `ReplayRatioGate`'s pace; produces weights, published through the
    ThreadSafeModel after each update, new replay priorities and `train/*` scalars.
    A non-finite loss goes to the `TrainingMonitor` (the rollback controller).

    Args:
        context: the run's context.
        learner_model: the learner model's container.
        target_model: the target network (a model of the same shape).
        optimizer: the optimizer over the learner model's parameters.
        replay_buffer: returns the current replay buffer.
        gate: the replay-ratio gate shared with the actor.
        action_masker: the allowed actions (next actions are chosen among them).
        env_steps: the actor's step count.
        monitor: watches losses for rollback (optional).
        demonstrations: the demonstration part of replay (DQfD): each batch then takes
            `round(batch_size * dqfd.demo_fraction)` rows from it and adds the
            large-margin loss on them. None: no demonstrations.
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
        monitor: TrainingMonitor | None = None,
        demonstrations: ReplayBuffer | None = None,
    ) -> None:
        super().__init__()
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
        self.monitor = monitor
        self.rng = context.spawn_rng("learner")
        self.updates = 0
        self.lr_scale = 1.0
        self._base_lrs = [float(group["lr"]) for group in optimizer.param_groups]
        self._hold = threading.Lock()
        self.dqfd = context.config.dqfd
        demo_rows = 0
        if demonstrations is not None:
            demo_rows = round(self.config.batch_size * self.dqfd.demo_fraction)
        self._metrics: dict[str, list[float]] = {"loss": [], "q": [], "td": [], "update_s": []}
        if demo_rows:
            self._metrics["margin"] = []
        self._rate_mark = (time.monotonic(), 0)
        self.last_metrics: dict[str, float] = {}
        self.target_model.requires_grad_(False)
        self._parameters = [p for p in self.model.parameters() if p.requires_grad]
        self.bf16 = self.config.precision == "bf16"
        if context.config.model.compile:
            self.model.compile()
            self.target_model.compile()
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
            demonstrations=demonstrations,
            demo_rows=demo_rows,
        )

    # -- one update -----------------------------------------------------------------------

    def beta(self, step: int) -> float:
        """The importance-weight exponent at env step `step`."""
        replay = self.context.config.replay
        used = (
            min(1.0, step / replay.beta_steps)
            if replay.beta_steps
            else self.context.budget_used(step)
        )
        return replay.beta_start + (1.0 - replay.beta_start) * used

    def update(self) -> dict[str, float]:
        """One gradient step; returns the loss, mean Q and mean |TD error| (and the
        large-margin loss with demonstrations)."""
        cfg = self.config
        batch = self.prefetcher.take(self.beta(self._env_steps()))
        online_next: Future[torch.Tensor] | None = None
        if cfg.double_dqn:
            # Read only, same weights: the prefetch thread computes the next observations'
            # online Q values while this thread runs the forward pass with gradients.
            online_next = self.prefetcher.submit(lambda: self._q_values(batch.next_observations))
        with autocast(batch.observations.device, self.bf16):
            q_values = self.model(batch.observations).float()
        target_q = batch.target_q
        if target_q is None or batch.target_version != self.target.version:
            target_q, _ = self.target.q_values(batch.next_observations)
        action_mask = self.action_masker.additive_mask(q_values.device)
        result = td_loss(
            q_values,
            batch.actions,
            batch.returns,
            batch.discounts,
            target_q,
            online_next.result() if online_next is not None else None,
            batch.weights,
            huber_delta=cfg.huber_delta,
            action_mask=action_mask,
        )
        loss = result.loss
        metrics: dict[str, float] = {}
        agent = batch.agent_rows  # the agent's rows come first, the demonstrations' last
        if batch.demo_rows:
            margin = large_margin_loss(
                q_values[agent:], batch.actions[agent:], self.dqfd.margin, action_mask
            )
            loss = loss + self.dqfd.margin_coef * margin
            metrics["margin"] = float(margin.detach())
        anchor = self.context.student_anchor
        anchor_coef = anchor.coefficient(self._env_steps()) if anchor is not None else 0.0
        if anchor_coef > 0:
            assert anchor is not None
            student = anchor.actions(batch.observations[:agent])
            margin = large_margin_loss(q_values[:agent], student, self.dqfd.margin, action_mask)
            loss = loss + anchor_coef * margin
            metrics["anchor_loss"] = float(margin.detach())
            agreement = q_values[:agent].detach().argmax(dim=1) == student
            metrics["anchor_agreement"] = float(agreement.float().mean())
        td_errors = result.td_errors.cpu().numpy()
        self._replay_buffer().update_priorities(
            batch.batch.indices[:agent], td_errors[:agent], batch.batch.generations[:agent]
        )
        # The next batch needs these priorities, not the new weights: it is prepared
        # while this one's backward pass and optimizer step run.
        self.prefetcher.request(self.beta(self._env_steps()))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        nn.utils.clip_grad_norm_(self._parameters, cfg.max_grad_norm, foreach=True)
        with self.learner_model.update():
            self.optimizer.step()
        self.updates += 1
        shrink_if_due(cfg.shrink_perturb, self.learner_model, self.updates, self.context.seed)
        self._update_target()
        if self.model.noisy:
            self.model.reset_noise()
            self.target_model.reset_noise()
        return {
            "loss": float(loss.detach()),
            "q": float(result.q_taken.mean()),
            "td": float(np.abs(td_errors).mean()),
            **metrics,
        }

    @torch.no_grad()
    def _q_values(self, observations: torch.Tensor) -> torch.Tensor:
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

    def set_lr_scale(self, scale: float) -> None:
        """Scale the learning rate from now on (the rollback controller lowers it)."""
        self.lr_scale = float(scale)
        for group, base in zip(self.optimizer.param_groups, self._base_lrs, strict=True):
            group["lr"] = base * self.lr_scale

    # -- thread ---------------------------------------------------------------------------

    def _before_start(self) -> None:
        """Before the learner thread starts: hold the actor to the replay ratio from now
        on, and start the batch prefetch thread."""
        self.gate.hold_actor(True)
        if self.config.prefetch:
            self.prefetcher.start()

    def catch_up(self, env_steps: int) -> None:
        """Make every update due at `env_steps` before returning (while the learner runs
        and the replay buffer holds a batch), so that a checkpoint's update count is
        exactly the replay ratio's."""
        if self.running and len(self._replay_buffer()) >= self.config.batch_size:
            self.gate.set_env_steps(env_steps)
            self.gate.wait_until_caught_up(self.context.stop_event)

    def refill_before_learning(self, env_steps: int) -> None:
        """Learn again only `learning_starts` env steps after `env_steps` (a resumed run
        whose replay buffer starts empty refills it first)."""
        self.gate.rebase(self.updates, env_steps + self.config.learning_starts)

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
                if self.monitor is not None and self.monitor.check_loss(
                    metrics["loss"], self._env_steps()
                ):
                    continue  # a non-finite loss: the monitor restored an earlier checkpoint
                self.gate.record_update()
                for key, value in metrics.items():
                    self._metrics.setdefault(key, []).append(value)
                if self.updates % self.config.log_every_updates == 0:
                    self._log()
        except BaseException as exc:
            self.context.report_error(exc)
        finally:
            self.prefetcher.close()
            self.gate.hold_actor(False)

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
        shrinks = self.config.shrink_perturb.count(self.updates)
        if shrinks is not None:
            values["train/shrink_perturbs"] = float(shrinks)
        if self._metrics.get("margin"):
            values["train/margin_loss"] = float(np.mean(self._metrics["margin"]))
        anchor = self.context.student_anchor
        if anchor is not None:
            values["train/anchor_coef"] = anchor.coefficient(step)
            for key in ("anchor_loss", "anchor_agreement"):
                if self._metrics.get(key):
                    values[f"train/{key}"] = float(np.mean(self._metrics[key]))
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
            "lr_scale": self.lr_scale,
            "target_model": {
                k: v.detach().clone() for k, v in self.target_model.state_dict().items()
            },
            "rng": dict(self.rng.bit_generator.state),
        }

    def load_state_dict(self, state: dict[str, Any], *, keep_counters: bool = False) -> None:
        """Restore what `state_dict` returned; with `keep_counters` (a rollback) the update
        count goes on from where it is."""
        if not keep_counters:
            self.updates = int(state["updates"])
        self.prefetcher.cancel()
        self.target.load(state["target_model"])
        self.rng.bit_generator.state = state["rng"]
        self.lr_scale = float(state.get("lr_scale", 1.0))
        self.gate.set_updates(self.updates)
