"""EpisodicLife: a lost life ends the learner's episode, and the game plays on from there."""

from __future__ import annotations

import numpy as np

from oakemu_rl.envs import EpisodicLife, OakEmuEnv

STAND_STILL = 0  # catch: the basket stays put, so most blocks are missed


def test_a_lost_life_ends_the_episode_but_not_the_game() -> None:
    plain = OakEmuEnv("catch")
    wrapped = EpisodicLife(OakEmuEnv("catch"))
    plain.reset(seed=5)
    observation, info = wrapped.reset(seed=5)
    lives_at_start = lives = info["lives"]
    episodes, rewards, plain_rewards = 0, [], []
    while True:
        observation, reward, terminated, truncated, info = wrapped.step(STAND_STILL)
        _, plain_reward, plain_terminated, plain_truncated, plain_info = plain.step(STAND_STILL)
        rewards.append(float(reward))
        plain_rewards.append(float(plain_reward))
        assert info["lives"] == plain_info["lives"]  # the same game, step for step
        if not (terminated or truncated):
            continue
        episodes += 1
        if info["game_over"]:
            assert plain_terminated or plain_truncated
            break
        assert info["lives"] == lives - 1  # one lost life ends the episode
        assert not (plain_terminated or plain_truncated)
        lives = info["lives"]
        continued, continued_info = wrapped.reset()  # the game goes on: no new game
        assert np.array_equal(continued, observation)
        assert continued_info["lives"] == lives
    assert episodes == lives_at_start  # one episode a life
    assert rewards == plain_rewards
    _, info = wrapped.reset()  # after the game's own end, a new game
    assert info["lives"] == lives_at_start


def test_a_seeded_reset_after_a_lost_life_starts_a_new_game() -> None:
    wrapped = EpisodicLife(OakEmuEnv("catch"))
    _, info = wrapped.reset(seed=5)
    lives_at_start = info["lives"]
    terminated = False
    while not terminated:
        _, _, terminated, _, info = wrapped.step(STAND_STILL)
    assert info["lives"] == lives_at_start - 1 and not info["game_over"]
    _, info = wrapped.reset(seed=5)
    assert info["lives"] == lives_at_start and not info["game_over"]
