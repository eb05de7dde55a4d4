"""PPOActor: collects rollouts with the stochastic policy, env by env, with no lockstep."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from ..runtime.actor import ActorBase, EpisodeObserver
from ..runtime.context import RuntimeContext
from ..runtime.env_lifecycle import ActorRuntimeState, EnvironmentState
from ..runtime.reward_shaping import RewardShapingPipeline
from ..runtime.thread_safe_model import ThreadSafeModel
from .bc import BCMaterialisationSource, BCMaterialiser, ReplayObservationCache
from .config import PPOExperimentConfiguration
from .handshake import RolloutHandshake
from .model import PPOModel
from .rollout_buffer import RolloutBuffer

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv, StepResult

__all__ = ["PPOActor"]

# What a row of an inference batch is for.
_ACT = 0  # choose, store and submit an action
_BOOTSTRAP = 1  # the env's column is full: only the value (GAE bootstrap); the env waits
_TRUNCATION = 2  # the value of a truncated step's final observation

# Between results, rebuilding demonstration observations for behaviour cloning may take
# about this many emulator steps for each env step the actor has handled (a quarter of
# its envs' pace at most); while it waits for the learner it takes as many as there are.
_BC_REPLAY_SHARE = 0.25
_BC_IDLE_WAIT_S = 0.01


@dataclass
class _Request:
    env_id: int
    kind: int
    row: int = -1


class PPOActor(ActorBase[PPOExperimentConfiguration, _Request]):
    """PPO actor that collects rollouts using the stochastic policy.

    Consumes env results in the order envs finish them; produces rollouts
    (observations, actions, log-probabilities, values, rewards, episode ends) in a
    RolloutBuffer, each env filling its own column. The actions of every ready env come
    from one `PPOModel.get_action_bundle` call per poll. An env whose column is full
    waits - its next step is not submitted - until every column is full and the learner
    has trained on the rollout and released it through the RolloutHandshake; then every
    waiting env gets an action from the new weights.

    With `ppo.overlap_collection`, the envs do not wait for the learner: the full
    buffer is handed over and the actor goes on filling a second one with the weights
    it has, taking the new weights as soon as the learner releases the rollout. It
    waits only when the next rollout is full before the learner is done, and for the
    rollouts the handshake says must be waited for (those that end at a checkpoint).

    Each step's reward goes through the configuration's `reward_shaping` pipeline (the
    `reward_shaping` attribute) before it is stored, as in DQN's Trainer.

    With behaviour cloning (`set_bc_materialisation_source`), the actor rebuilds the
    demonstration observations the learner's BC sampler asks for into the replay
    observation cache: while it waits for the learner, and between results within a
    budget of emulator steps (`_BC_REPLAY_SHARE` of the env steps it handles).

    Args:
        context: The shared runtime context.
        actor_model: The local PPO model for action selection.
        learner_model: The learner model container (for weight sync).
        rollout_buffer: The rollout buffer to fill.
        rollout_handshake: Synchronizes rollout hand-off with the learner.
        episode_observer: Optional observer invoked with each completed episode's data:
            its scalars (`episode/return`, `episode/length`, ...), the env step, and
            whether the episode was won.
        replay_observation_cache: The replay observation cache shared with the
            learner-side BC sampler (where materialised demonstration observations go).
        env_factory: Optional multi-environment factory (default: the configured game).
    """

    def __init__(
        self,
        context: RuntimeContext[PPOExperimentConfiguration],
        actor_model: PPOModel,
        learner_model: ThreadSafeModel[PPOModel],
        rollout_buffer: RolloutBuffer,
        rollout_handshake: RolloutHandshake,
        episode_observer: EpisodeObserver | None = None,
        replay_observation_cache: ReplayObservationCache | None = None,
        env_factory: Callable[[], OakEmuMultiEnv] | None = None,
    ) -> None:
        config = context.config
        if rollout_buffer.num_envs != config.env.num_envs:
            raise ValueError(
                f"the rollout buffer has {rollout_buffer.num_envs} columns; "
                f"env.num_envs is {config.env.num_envs}"
            )
        super().__init__(context, actor_model, learner_model, env_factory, episode_observer)
        self.actor_model: PPOModel = actor_model
        self.rollout_buffer = rollout_buffer
        self.rollout_handshake = rollout_handshake
        self.reward_shaping = RewardShapingPipeline.from_config(
            config.reward_shaping, gamma=config.ppo.gamma, game=config.game
        )
        self.generator = torch.Generator().manual_seed(context.seed)
        self._synced_version = -1
        self._parked: list[int] = []
        self._last_row = -1
        self.rollouts_collected = 0
        self._overlap = config.ppo.overlap_collection
        self._spare_buffer: RolloutBuffer | None = None
        self._synced_release = 0
        self._replay_cache = replay_observation_cache
        self._bc: BCMaterialiser | None = None
        self._bc_credit = 0.0
        self._bc_mark = 0

    # -- properties ---------------------------------------------------------------------

    @property
    def replay_observation_cache(self) -> ReplayObservationCache | None:
        """Get the replay observation cache shared with the learner-side BC sampler, if enabled."""
        return self._replay_cache

    @property
    def parked_envs(self) -> int:
        """Envs whose column is full, waiting for the learner to release the rollout."""
        return len(self._parked)

    def set_bc_materialisation_source(self, source: BCMaterialisationSource | None) -> None:
        """Attach the learner-side BC sampler's materialisation queue.

        The actor then rebuilds the requested observations of the run's demonstrations
        (`context.demonstrations`) into the replay observation cache.

        Args:
            source: The request source, or None to disable materialisation.

        Raises:
            ValueError: a source without a replay observation cache or demonstrations.
        """
        if source is None:
            self._bc = None
            return
        demonstrations = self.context.demonstrations
        if self._replay_cache is None or demonstrations is None:
            raise ValueError(
                "materialising demonstration observations needs the actor's "
                "replay_observation_cache and the run's demonstrations (context.demonstrations)"
            )
        self._bc = BCMaterialiser(source, self._replay_cache, demonstrations)

    @property
    def bc_materialised(self) -> int:
        """Demonstration observations this actor has rebuilt for the BC sampler."""
        return self._bc.materialised if self._bc is not None else 0

    def materialise_bc_requests(self, budget: float | None = None) -> int:
        """Rebuild requested demonstration observations into the cache, within `budget`
        emulator steps (None: every request waiting); returns how many were rebuilt."""
        if self._bc is None:
            return 0
        before = self._bc.materialised
        self._bc.serve(float("inf") if budget is None else budget)
        return self._bc.materialised - before

    # -- weights ------------------------------------------------------------------------

    def _sync_weights(self) -> None:
        version = self.learner_model.copy_to(self.actor_model, self._synced_version)
        if version is not None:
            self._synced_version = version

    def _sync_released_weights(self) -> None:
        """Take the learner's weights once it has released a rollout (overlapping mode:
        between a release and the next hand-over the learner does not change them)."""
        releases = self.rollout_handshake.releases
        if releases != self._synced_release:
            self._synced_release = releases
            self._sync_weights()

    # -- the algorithm's part of the loop ---------------------------------------------------

    def _check_env(self, env: OakEmuMultiEnv) -> None:
        shape = tuple(env.observation_space.shape)
        if shape != self.rollout_buffer.observation_shape:
            raise ValueError(
                f"the envs' observations have shape {shape}; the rollout buffer expects "
                f"{self.rollout_buffer.observation_shape}"
            )

    def _start_episodes(self, env: OakEmuMultiEnv) -> None:
        self._sync_weights()
        self._synced_release = self.rollout_handshake.releases
        self.rollout_buffer.reset()
        self._parked.clear()
        super()._start_episodes(env)

    def _on_episode_start(
        self, env: OakEmuMultiEnv, state: EnvironmentState, result: StepResult
    ) -> None:
        if self.rollout_buffer.column_full(state.env_id):
            self._parked.append(state.env_id)  # its last step ended an episode: no bootstrap
        else:
            assert state.observation is not None
            self._queue_for_inference(_Request(state.env_id, _ACT), state.observation)

    def _record_step(
        self, state: EnvironmentState, result: StepResult, next_observation: npt.NDArray[Any]
    ) -> float:
        # `state` still describes the env before this step (a life-loss penalty needs it).
        reward = self.reward_shaping(float(result.reward), result.info, state, next_observation)
        self._last_row = self.rollout_buffer.add_outcome(
            state.env_id,
            reward,
            self._learner_terminated(state, result),
            bool(result.truncated),
        )
        return reward

    def _on_final_step(self, state: EnvironmentState, result: StepResult) -> None:
        if self.rollout_buffer.truncated[self._last_row, state.env_id]:
            # The value of the final observation stands in for the return after the cut.
            request = _Request(state.env_id, _TRUNCATION, self._last_row)
            self._queue_for_inference(request, np.asarray(result.observation))

    def _choose_action(self, env: OakEmuMultiEnv, state: EnvironmentState) -> None:
        env_id = state.env_id
        assert state.observation is not None
        if self.rollout_buffer.column_full(env_id):
            self._parked.append(env_id)
            self._queue_for_inference(_Request(env_id, _BOOTSTRAP), state.observation)
        else:
            self._queue_for_inference(_Request(env_id, _ACT), state.observation)

    def _on_worker_lost(self, state: EnvironmentState) -> None:
        # The action in flight was lost with its worker. The step before it is cut off
        # there, bootstrapping from its successor's value.
        buffer, env_id = self.rollout_buffer, state.env_id
        if buffer.has_pending_action(env_id):
            t = int(buffer.positions[env_id])
            value = float(buffer.values[t, env_id])
            buffer.discard_pending_action(env_id)
            row = buffer.truncate_last(env_id)
            if row is not None:
                buffer.set_truncation_value(env_id, row, value)

    def _act_on_batch(
        self,
        env: OakEmuMultiEnv,
        observations: npt.NDArray[Any],
        batch: torch.Tensor,
        entries: list[_Request],
    ) -> None:
        with torch.inference_mode():
            bundle = self.actor_model.get_action_bundle(batch, generator=self.generator)
        actions = bundle.actions.cpu().numpy()
        log_probs = bundle.log_probs.float().cpu().numpy()
        values = bundle.values.float().cpu().numpy()
        buffer = self.rollout_buffer
        for i, request in enumerate(entries):
            env_id = request.env_id
            if request.kind == _ACT:
                action = int(actions[i])
                buffer.add_action(env_id, observations[i], action, log_probs[i], values[i])
                self.lifecycle[env_id].last_action = action
                env.submit(env_id, action)
            elif request.kind == _BOOTSTRAP:
                buffer.set_last_value(env_id, float(values[i]))
            else:
                buffer.set_truncation_value(env_id, request.row, float(values[i]))

    def _after_batch(self, env: OakEmuMultiEnv) -> bool:
        if self.rollout_buffer.full and not self._hand_off(env):
            return False
        if self._overlap:
            self._sync_released_weights()
        if self._bc is not None:
            credit = self._bc_credit + _BC_REPLAY_SHARE * (self._steps - self._bc_mark)
            self._bc_mark = self._steps
            # Capped, yet always enough for the dearest observation.
            credit = min(credit, 2.0 * self._bc.max_cost)
            self._bc_credit = credit - self._bc.serve(credit)
        return True

    def _after_loop(self) -> None:
        if self._overlap:
            self._await_release()  # the last rollout is trained on

    def _await_release(self) -> bool:
        """Wait for the learner to release the rollout (False when stopped), rebuilding
        requested demonstration observations meanwhile."""
        handshake, bc = self.rollout_handshake, self._bc
        if bc is None:
            return handshake.wait_for_release()
        # The learner never waits for these observations, so serving them here cannot hold
        # up the release; each round serves at most one observation, then looks again.
        while not handshake.wait_for_release(timeout=0.0 if bc.pending else _BC_IDLE_WAIT_S):
            if handshake.stopped:
                return False
            bc.serve(bc.max_cost)
        return True

    def _hand_off(self, env: OakEmuMultiEnv) -> bool:
        """Give the full rollout to the learner, wait (unless collection overlaps training),
        then resume the waiting envs."""
        self.rollouts_collected += 1
        handshake = self.rollout_handshake
        full = self.rollout_buffer
        full.end_step = self._steps
        if not self._overlap:
            handshake.signal_full(full)
            if not self._await_release():
                return False
            self._sync_weights()
        else:
            if not self._await_release():  # the learner is done with the previous one
                return False
            self._sync_released_weights()
            # Asked before the hand-over: the learner's hook for this rollout may run soon after.
            waits = handshake.must_wait(self._steps)
            handshake.signal_full(full)
            if waits:
                if not self._await_release():
                    return False
                self._sync_released_weights()
            else:
                spare = self._spare_buffer if self._spare_buffer is not None else full.empty_like()
                self._spare_buffer, self.rollout_buffer = full, spare
        self.rollout_buffer.reset()
        parked, self._parked = self._parked, []
        for env_id in parked:
            state = self.lifecycle[env_id]
            assert state.observation is not None
            self._queue_for_inference(_Request(env_id, _ACT), state.observation)
        self._flush_inference(env)
        return True

    def _actor_scalars(self) -> dict[str, float]:
        scalars = {
            "perf/actor_wait_s": self.rollout_handshake.actor_wait_s,
            "actor/parked_envs": float(len(self._parked)),
        }
        if self._bc is not None:
            scalars["actor/bc_materialised"] = float(self._bc.materialised)
            scalars["actor/bc_pending"] = float(self._bc.pending)
        return scalars

    # -- state ----------------------------------------------------------------------------

    def _extra_rng_states(self) -> dict[str, Any]:
        return {"sampler": base64.b64encode(self.generator.get_state().numpy().tobytes()).decode()}

    def _extra_state(self) -> dict[str, Any]:
        return {"rollouts": self.rollouts_collected}

    def _restore_extra(self, state: ActorRuntimeState) -> None:
        sampler = state.rng_states.get("sampler")
        if sampler:
            raw = np.frombuffer(base64.b64decode(sampler), dtype=np.uint8).copy()
            self.generator.set_state(torch.from_numpy(raw))
        self.rollouts_collected = int(state.extra.get("rollouts", 0))
        self._synced_version = -1
