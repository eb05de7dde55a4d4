"""The PPO learner thread: GAE, then epochs of clipped-objective minibatch updates.

Per rollout (CleanRL's recipe):

1. anneal the learning rate linearly with the env steps taken (`ppo.anneal_lr`);
2. compute GAE(lambda) advantages and returns in the rollout buffer; with
   `ppo.value_normalization`, fold the returns into the value head's PopArt statistics,
   and learn the values in their normalised units;
3. for `epochs` epochs, for each of `minibatches` shuffled minibatches: the clipped
   surrogate policy loss on (per-minibatch normalised) advantages, the (clipped)
   value loss and the entropy bonus; with demonstrations, plus coef(t) x the
   behaviour-cloning loss (the cross-entropy of the demonstrated actions under the
   policy, on a batch of demonstration steps from the `BCSampler`); in a run started
   from a distilled student, plus coef(t) x KL(student || policy) (`StudentAnchor`);
   one Adam step
   with gradient-norm clipping; stop the epochs early once the approximate KL
   exceeds `target_kl`;
4. publish the weights through the ThreadSafeModel, run the rollout hooks
   (checkpoints, evaluation requests) and release the actor.

A non-finite loss is never applied: it goes to the RollbackController, which restores
the learner from an earlier checkpoint (without one, the run stops with an error).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..runtime.context import RuntimeContext
from ..runtime.learner_thread import LearnerThread
from ..runtime.thread_safe_model import ThreadSafeModel
from .bc import BCSampler, bc_coefficient
from .config import PPOExperimentConfiguration
from .handshake import RolloutHandshake
from .model import PPOModel
from .rollout_buffer import RolloutBuffer

if TYPE_CHECKING:
    from ..runtime.rollback import TrainingMonitor

__all__ = ["NonFiniteLossError", "PPOLearner"]

RolloutHook = Callable[[int], None]

#: The per-update statistics, averaged over a rollout's updates as `train/<name>`.
_STATS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "grad_norm")
#: The same for the minibatches with a behaviour-cloning loss.
_BC_STATS = ("bc_loss", "bc_agreement")


class NonFiniteLossError(FloatingPointError):
    """A loss was NaN or infinite and no rollback could handle it."""


class PPOLearner(LearnerThread):
    """Trains the learner model on each rollout the actor hands over.

    Args:
        context: the shared runtime context.
        learner_model: the learner model container (weights published to the actor).
        optimizer: Adam over the learner model's parameters.
        rollout_buffer: the buffer the actor fills (trained on unless the handshake names
            another: an actor that overlaps collection with training alternates two).
        handshake: hands rollouts over and back.
        env_steps: the actor's step count (for annealing and logging).
        monitor: watches losses and weights for rollback (optional).
        on_rollout: called on the learner thread with the env step each trained rollout
            ends at, after its weights are published and before the actor is released
            (the experiment checkpoints and requests evaluations there).
        bc_sampler: demonstration steps for a behaviour-cloning loss, weighted by
            `bc_coefficient(config.bc, step)` (None: no BC loss).
    """

    def __init__(
        self,
        context: RuntimeContext[PPOExperimentConfiguration],
        learner_model: ThreadSafeModel[PPOModel],
        optimizer: torch.optim.Optimizer,
        rollout_buffer: RolloutBuffer,
        handshake: RolloutHandshake,
        env_steps: Callable[[], int],
        *,
        monitor: TrainingMonitor | None = None,
        on_rollout: RolloutHook | None = None,
        bc_sampler: BCSampler | None = None,
    ) -> None:
        super().__init__()
        self.context = context
        self.config = context.config
        self.settings = context.config.ppo
        self.learner_model = learner_model
        self.model = learner_model.model
        self._params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = optimizer
        self.rollout_buffer = rollout_buffer
        self.handshake = handshake
        self._env_steps = env_steps
        self.monitor = monitor
        self.on_rollout = on_rollout
        self.bc_sampler = bc_sampler
        self.generator = torch.Generator().manual_seed(context.seed + 7919)
        self.updates = 0
        self.rollouts = 0
        self.lr_scale = 1.0
        self.last_metrics: dict[str, float] = {}
        self._hold = threading.RLock()
        self._rate_mark = (time.monotonic(), 0)

    # -- learning rate --------------------------------------------------------------------

    def learning_rate(self, env_steps: int) -> float:
        """The learning rate for a rollout that ends at `env_steps`."""
        lr = self.settings.learning_rate * self.lr_scale
        if self.settings.anneal_lr:
            done = max(0, env_steps - self.config.rollout_size)
            lr *= 1.0 - self.context.budget_used(done)
        return lr

    def set_lr_scale(self, scale: float) -> None:
        """Scale the learning rate from now on (the rollback controller lowers it)."""
        self.lr_scale = float(scale)
        self._set_lr(self.learning_rate(self._env_steps()))

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    # -- one rollout ----------------------------------------------------------------------

    def train_on_rollout(self, buffer: RolloutBuffer | None = None) -> dict[str, float]:
        """Train on a full rollout buffer (default: `rollout_buffer`); returns the rollout's
        training metrics."""
        with self._hold:
            return self._train(buffer if buffer is not None else self.rollout_buffer)

    def _rollout_step(self, buffer: RolloutBuffer) -> int:
        """The env step a rollout ends at: recorded at hand-off, so that an actor already
        collecting the next rollout does not move it (learning rate, logs, hooks)."""
        return buffer.end_step if buffer.end_step is not None else self._env_steps()

    def _train(self, buffer: RolloutBuffer) -> dict[str, float]:
        s = self.settings
        step = self._rollout_step(buffer)
        self._set_lr(self.learning_rate(step))
        buffer.compute_returns_and_advantages(s.gamma, s.gae_lambda)
        model = self.model
        if s.value_normalization:
            with self.learner_model.update():
                model.update_value_statistics(torch.from_numpy(buffer.returns))
        params = self._params
        value_clip = s.value_clip_coef if s.value_clip_coef is not None else s.clip_coef
        low, high = 1.0 - s.clip_coef, 1.0 + s.clip_coef
        # Per-update statistics stay tensors (one row per update) and are read once at the
        # end: a float() per statistic and update costs more than the update's arithmetic
        # on a small network.
        stats: list[torch.Tensor] = []
        bc_stats: list[torch.Tensor] = []
        bc_coef = bc_coefficient(self.config.bc, step) if self.bc_sampler is not None else 0.0
        anchor = self.context.student_anchor
        anchor_coef = anchor.coefficient(step) if anchor is not None else 0.0
        # Through the value warm-up only the value head learns; the anchor holds the policy.
        warming_up = anchor is not None and anchor.warming_up(step)
        anchor_stats: list[torch.Tensor] = []
        epochs_done = 0
        stopped_early = False
        for _ in range(s.epochs):
            epochs_done += 1
            for batch in buffer.minibatches(s.minibatches, self.generator):
                evaluation = model.evaluate_policy(batch.observations, batch.actions)
                new_log_probs, entropy, new_values = evaluation[:3]
                log_ratio = new_log_probs - batch.log_probs
                ratio = log_ratio.exp()

                advantages = batch.advantages
                if s.normalize_advantages and advantages.numel() > 1:
                    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                policy_loss = torch.max(
                    -advantages * ratio, -advantages * ratio.clamp(low, high)
                ).mean()

                # In the value head's units (normalised ones with value normalisation).
                targets = model.normalize_values(batch.returns)
                if s.clip_value_loss:
                    old_values = model.normalize_values(batch.values)
                    clipped = old_values + (new_values - old_values).clamp(-value_clip, value_clip)
                    losses = (clipped - targets) ** 2
                    if s.value_loss_form == "max":
                        losses = torch.max((new_values - targets) ** 2, losses)
                    value_loss = 0.5 * losses.mean()
                else:
                    value_loss = 0.5 * ((new_values - targets) ** 2).mean()
                entropy_mean = entropy.mean()
                loss = s.vf_coef * value_loss
                if not warming_up:
                    loss = loss + policy_loss - s.ent_coef * entropy_mean
                bc = self._bc_terms() if bc_coef > 0 else None
                if bc is not None:
                    bc_loss, bc_agreement = bc
                    loss = loss + bc_coef * bc_loss
                    bc_stats.append(torch.stack((bc_loss.detach(), bc_agreement)))

                if anchor_coef > 0:
                    assert anchor is not None
                    anchor_kl = anchor.kl(batch.observations, evaluation.action_log_probs)
                    loss = loss + anchor_coef * anchor_kl
                    anchor_stats.append(anchor_kl.detach())

                if not bool(torch.isfinite(loss)):
                    return self._non_finite(loss, step)
                for param in params:  # what optimizer.zero_grad(set_to_none=True) does
                    param.grad = None
                loss.backward()  # type: ignore[no-untyped-call]
                grad_norm = nn.utils.clip_grad_norm_(params, s.max_grad_norm, foreach=True)
                if not bool(torch.isfinite(grad_norm)):
                    return self._non_finite(grad_norm, step)
                with self.learner_model.update():
                    self.optimizer.step()
                self.updates += 1
                if self.monitor is not None:
                    self.monitor.note_healthy_updates(1)

                with torch.no_grad():
                    kl = ((ratio - 1.0) - log_ratio).mean()
                    clipfrac = ((ratio - 1.0).abs() > s.clip_coef).float().mean()
                    stats.append(
                        torch.stack(
                            (
                                loss,
                                policy_loss,
                                value_loss,
                                entropy_mean,
                                kl,
                                clipfrac,
                                grad_norm.to(loss.dtype),
                            )
                        )
                    )
            if s.target_kl is not None and stats and float(stats[-1][4]) > s.target_kl:
                stopped_early = True
                break
        self.rollouts += 1
        if self.monitor is not None and self.monitor.check_weights(model.parameters(), step):
            return {"rolled_back": 1.0}
        metrics: dict[str, float] = {}
        if stats:
            means = torch.stack(stats).mean(dim=0).tolist()
            metrics = {f"train/{name}": value for name, value in zip(_STATS, means, strict=True)}
        if self.bc_sampler is not None:
            metrics["train/bc_coef"] = bc_coef
            metrics["train/bc_minibatches"] = float(len(bc_stats))
            metrics["train/bc_cache_hit_rate"] = self.bc_sampler.hit_rate
            if bc_stats:
                means = torch.stack(bc_stats).mean(dim=0).tolist()
                metrics.update(
                    {f"train/{name}": value for name, value in zip(_BC_STATS, means, strict=True)}
                )
        if anchor is not None:
            metrics["train/anchor_coef"] = anchor_coef
            metrics["train/value_warmup"] = float(warming_up)
            if anchor_stats:
                metrics["train/anchor_loss"] = float(torch.stack(anchor_stats).mean())
        values, returns = buffer.values.reshape(-1), buffer.returns.reshape(-1)
        variance = float(np.var(returns))
        explained = 1.0 - float(np.var(returns - values)) / variance if variance else float("nan")
        metrics.update(
            {
                "train/explained_variance": explained,
                "train/learning_rate": float(self.optimizer.param_groups[0]["lr"]),
                "train/epochs": float(epochs_done),
                "train/kl_early_stop": float(stopped_early),
                "train/updates": float(self.updates),
                "train/rollouts": float(self.rollouts),
                "train/mean_advantage": float(buffer.advantages.mean()),
                "train/mean_value": float(values.mean()),
            }
        )
        if s.value_normalization:
            mean, std = model.value_moments()
            metrics["train/value_norm_mean"], metrics["train/value_norm_std"] = mean, std
        now, (mark_time, mark_updates) = time.monotonic(), self._rate_mark
        self._rate_mark = (now, self.updates)
        metrics["perf/updates_per_s"] = (self.updates - mark_updates) / max(1e-9, now - mark_time)
        self.last_metrics = metrics
        for name, value in metrics.items():
            self.context.metrics.scalar(name, value, step)
        return metrics

    def _bc_terms(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The BC loss on a batch of demonstration steps (the cross-entropy of the
        demonstrated actions under the masked policy) and the share of them where the
        policy's most likely action is the demonstrated one; None when too few are cached."""
        assert self.bc_sampler is not None
        demo = self.bc_sampler.sample()
        if demo is None:
            return None
        device = self.context.device
        observations = torch.from_numpy(demo.observations).to(device)
        actions = torch.from_numpy(demo.actions).to(device)
        logits = self.model(observations)
        loss = F.cross_entropy(logits, actions)
        agreement = (logits.detach().argmax(dim=-1) == actions).to(loss.dtype).mean()
        return loss, agreement

    def _non_finite(self, value: torch.Tensor, step: int) -> dict[str, float]:
        self.optimizer.zero_grad(set_to_none=True)
        if self.monitor is not None and self.monitor.check_loss(value, step):
            return {"rolled_back": 1.0}
        raise NonFiniteLossError(
            f"non-finite PPO loss ({float(value.detach())}) at step {step:,} and no "
            "rollback to recover from it (enable rollback and checkpoints)"
        )

    # -- thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        handshake = self.handshake
        self.context.enter_thread()
        try:
            while handshake.wait_for_rollout():
                try:
                    handed = handshake.rollout
                    buffer = handed if isinstance(handed, RolloutBuffer) else self.rollout_buffer
                    self.train_on_rollout(buffer)
                    if self.on_rollout is not None:
                        self.on_rollout(self._rollout_step(buffer))
                finally:
                    handshake.release()
        except BaseException as exc:
            self.context.report_error(exc)
            handshake.stop()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Keep the learner between rollouts while the block runs (checkpoints, rollbacks)."""
        with self._hold:
            yield

    # -- state ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Counters, learning-rate scale and minibatch RNG (model and optimizer are saved apart)."""
        state: dict[str, Any] = {
            "updates": self.updates,
            "rollouts": self.rollouts,
            "lr_scale": self.lr_scale,
            "generator": self.generator.get_state(),
        }
        if self.bc_sampler is not None:
            state["bc_sampler"] = self.bc_sampler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any], *, keep_counters: bool = False) -> None:
        """Restore what `state_dict` returned; with `keep_counters` (a rollback) the update
        and rollout counts go on from where they are."""
        if not keep_counters:
            self.updates = int(state["updates"])
            self.rollouts = int(state.get("rollouts", 0))
        self.lr_scale = float(state.get("lr_scale", 1.0))
        generator = state.get("generator")
        if generator is not None:
            self.generator.set_state(generator)
        if self.bc_sampler is not None and state.get("bc_sampler") is not None:
            self.bc_sampler.load_state_dict(state["bc_sampler"])
