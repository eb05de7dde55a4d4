"""Learning from demonstrations as DQfD does (Hester et al. 2018).

The demonstrations of a run are kept in a replay buffer of their own, filled once when
the run is built and never overwritten: every demonstration step becomes a `Transition`,
so the buffer computes n-step returns for them exactly as for the agent's own steps.
Each learner batch takes `dqfd.demo_fraction` of its rows from it (`BatchPrefetcher`).
On those rows the TD loss is joined by a large-margin supervised loss that makes the
demonstrated action's Q value beat every other action's by `dqfd.margin`
(`large_margin_loss`).

The buffer is not checkpointed: a resumed run rebuilds it from the trajectory files.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import torch

from ..envs.lives import lives_lost
from ..runtime.env_lifecycle import EnvironmentState
from ..runtime.reward_shaping import RewardShapingPipeline
from ..trajectories.demonstrations import DemonstrationSet
from .replay_buffer import ReplayBatch, ReplayBuffer, Transition

__all__ = [
    "build_demonstration_buffer",
    "demonstration_transitions",
    "join_batches",
    "large_margin_loss",
]


def demonstration_transitions(
    demonstrations: DemonstrationSet,
    demo_id: int,
    reward_shaping: RewardShapingPipeline | None = None,
    episodic_life: bool = False,
) -> list[Transition]:
    """Every step of demonstration `demo_id`, replayed, as the actor would stage it
    (env id: the demonstration's id; rewards shaped as the agent's are; with
    `episodic_life`, a step that loses a life ends bootstrapping as the agent's do)."""
    shaping = reward_shaping or RewardShapingPipeline()
    steps = demonstrations.steps(demo_id)
    # Shapers see the env state before each step (a life-loss penalty compares lives).
    state = EnvironmentState(env_id=demo_id, rng=np.random.default_rng(0))
    state.begin_episode(steps[0].observation, demonstrations.states(demo_id).values[0])
    transitions = []
    for step in steps:
        reward = shaping(step.reward, step.info, state, step.next_observation)
        lives = step.info.get("lives")
        life_lost = lives_lost(state.last_lives, lives) > 0
        transitions.append(
            Transition(
                demo_id,
                step.observation,
                step.action,
                reward,
                step.next_observation,
                step.terminated or (episodic_life and life_lost),
                step.truncated,
                episode_start=step.index == 0,
            )
        )
        state.last_lives = int(lives) if lives is not None else None
        state.episode_start = False
    return transitions


def build_demonstration_buffer(
    demonstrations: DemonstrationSet,
    template: ReplayBuffer,
    reward_shaping: RewardShapingPipeline | None = None,
    episodic_life: bool = False,
) -> ReplayBuffer:
    """A uniform replay buffer holding every step of `demonstrations` as an n-step
    transition, with the observation layout, n and gamma of `template` (the agent's)."""
    total = demonstrations.total_steps
    buffer = ReplayBuffer(
        total,
        template.observation_shape,
        observation_dtype=template.observation_dtype,
        frame_stack=template.frame_stack,
        n_step=template.n_step,
        gamma=template.gamma,
        prioritized=False,
        # Room for every frame: at most `frame_stack` for each first observation, then
        # one a step; none is ever overwritten.
        frame_capacity=total + len(demonstrations) * template.frame_stack,
    )
    for demo in demonstrations:
        buffer.add_batch(
            demonstration_transitions(demonstrations, demo.id, reward_shaping, episodic_life)
        )
    # A recording that stopped before its episode ended: its last steps bootstrap.
    buffer.end_episodes()
    return buffer


def join_batches(first: ReplayBatch, second: ReplayBatch) -> ReplayBatch:
    """One batch: the rows of `first`, then those of `second`."""
    return ReplayBatch(
        **{
            f.name: np.concatenate([getattr(first, f.name), getattr(second, f.name)])
            for f in fields(ReplayBatch)
        }
    )


def large_margin_loss(
    q_values: torch.Tensor,
    expert_actions: torch.Tensor,
    margin: float,
    action_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """DQfD's supervised loss on demonstration rows:
    mean over rows of max_a [Q(s, a) + margin * (a != a_E)] - Q(s, a_E).

    Args:
        q_values: online Q values of the demonstrations' observations, [rows, actions].
        expert_actions: the demonstrated actions a_E, [rows].
        margin: how far every other action's Q must stay below the demonstrated one's.
        action_mask: added to the Q values (-inf for actions not allowed: they take no
            part in the max).
    """
    expert = expert_actions.unsqueeze(1)
    margins = torch.full_like(q_values, margin).scatter_(1, expert, 0.0)
    augmented = q_values + margins
    if action_mask is not None:
        augmented = augmented + action_mask
    expert_q = q_values.gather(1, expert).squeeze(1)
    return (augmented.max(dim=1).values - expert_q).mean()
