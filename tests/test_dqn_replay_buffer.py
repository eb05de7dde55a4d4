"""ReplayBuffer and SumTree: n-step targets, frame storage, priorities, sampling statistics."""

from __future__ import annotations

import numpy as np
import pytest

from oakemu_rl.dqn.replay_buffer import ReplayBuffer, Transition
from oakemu_rl.dqn.sum_tree import SumTree

# -- sum tree ------------------------------------------------------------------------------


def test_sum_tree_sums_and_updates() -> None:
    tree = SumTree(5)
    tree.update([0, 1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0, 5.0])
    assert tree.total == pytest.approx(15.0)
    tree.update([2, 2], [10.0, 0.5])  # the last value of a repeated index wins
    assert tree.get([2])[0] == 0.5
    assert tree.total == pytest.approx(12.5)
    with pytest.raises(ValueError):
        tree.update([0], [-1.0])
    with pytest.raises(IndexError):
        tree.update([5], [1.0])


def test_sum_tree_find_matches_prefix_sums() -> None:
    rng = np.random.default_rng(1)
    priorities = rng.random(37) * (rng.random(37) > 0.2)  # some zeros
    tree = SumTree(37)
    tree.update(np.arange(37), priorities)
    cumulative = np.cumsum(priorities)
    values = rng.random(2000) * cumulative[-1]
    expected = np.searchsorted(cumulative, values, side="right")
    np.testing.assert_array_equal(tree.find(values), expected)
    assert np.all(priorities[tree.find(values)] > 0)  # zero-priority leaves are never found


def test_sum_tree_sampling_frequencies_follow_priorities() -> None:
    rng = np.random.default_rng(2)
    priorities = np.array([1.0, 2.0, 4.0, 8.0, 0.0, 1.0])
    tree = SumTree(len(priorities))
    tree.update(np.arange(len(priorities)), priorities)
    draws = tree.find(rng.random(200_000) * tree.total)
    frequencies = np.bincount(draws, minlength=len(priorities)) / len(draws)
    np.testing.assert_allclose(frequencies, priorities / priorities.sum(), atol=0.005)


# -- helpers ------------------------------------------------------------------------------


def vector_step(
    buffer: ReplayBuffer,
    env_id: int,
    obs: float,
    action: int,
    reward: float,
    next_obs: float,
    *,
    terminated: bool = False,
    truncated: bool = False,
    start: bool = False,
) -> None:
    buffer.add(
        Transition(
            env_id,
            np.array([obs], dtype=np.float32),
            action,
            reward,
            np.array([next_obs], dtype=np.float32),
            terminated,
            truncated,
            start,
        )
    )


# -- n-step returns -----------------------------------------------------------------------


def test_n_step_returns_match_hand_computation() -> None:
    gamma = 0.9
    buffer = ReplayBuffer(100, (1,), observation_dtype=np.float32, n_step=3, gamma=gamma)
    rewards = [1.0, 2.0, 3.0, 4.0, 5.0]
    # one episode of 5 steps, observations 0..5, terminated at the end
    for t, r in enumerate(rewards):
        vector_step(buffer, 0, t, t % 2, r, t + 1, terminated=t == 4, start=t == 0)
    data = buffer.transitions()
    assert len(buffer) == 5
    g = gamma
    expected_returns = [
        1 + g * 2 + g * g * 3,  # t=0: three rewards, bootstrap from s3
        2 + g * 3 + g * g * 4,  # t=1: bootstrap from s4
        3 + g * 4 + g * g * 5,  # t=2: terminal after three rewards
        4 + g * 5,  # t=3: episode ends after two rewards
        5.0,  # t=4
    ]
    np.testing.assert_allclose(data["returns"], expected_returns, rtol=1e-6)
    np.testing.assert_allclose(data["discounts"], [g**3, g**3, 0, 0, 0], rtol=1e-6)
    np.testing.assert_array_equal(data["observations"][:, 0], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(data["next_observations"][:, 0], [3, 4, 5, 5, 5])
    np.testing.assert_array_equal(data["actions"], [0, 1, 0, 1, 0])


def test_an_annealed_n_step_return_shortens_as_transitions_are_written() -> None:
    gamma = 0.5
    buffer = ReplayBuffer(
        100,
        (1,),
        observation_dtype=np.float32,
        n_step=1,
        gamma=gamma,
        n_step_start=3,
        n_step_anneal=4,
    )
    assert buffer.current_n_step == 3
    rewards = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    for t, r in enumerate(rewards):  # one episode, observations 0..7, still running
        vector_step(buffer, 0, t, 0, r, t + 1, start=t == 0)
    data = buffer.transitions()
    starts = data["observations"][:, 0].astype(int)
    lengths = (data["next_observations"][:, 0] - data["observations"][:, 0]).astype(int)
    # n after 0, 1, 2, 3 and 4+ transitions: 3, round(2.5), 2, round(1.5), 1 (to even).
    assert starts.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert lengths.tolist() == [3, 2, 2, 2, 1, 1, 1]
    for start, n, ret, discount in zip(
        starts, lengths, data["returns"], data["discounts"], strict=True
    ):
        expected = sum(gamma**j * rewards[start + j] for j in range(n))
        assert ret == pytest.approx(expected) and discount == pytest.approx(gamma**n)
    assert buffer.current_n_step == 1 and buffer.pending_count == 0
    # The schedule goes on from where a restored buffer left it.
    restored = buffer.clone_empty()
    restored.load_state_dict(buffer.state_dict())
    assert restored.current_n_step == 1 and restored.n_step_start == 3


def test_truncation_bootstraps_and_envs_interleave() -> None:
    gamma = 0.5
    buffer = ReplayBuffer(100, (1,), observation_dtype=np.float32, n_step=2, gamma=gamma)
    # env 0: 0 -> 1 -> 2 (truncated); env 1: 10 -> 11 -> 12 -> 13 (running), interleaved
    vector_step(buffer, 0, 0, 0, 1.0, 1, start=True)
    vector_step(buffer, 1, 10, 1, 10.0, 11, start=True)
    vector_step(buffer, 0, 1, 0, 2.0, 2, truncated=True)
    vector_step(buffer, 1, 11, 1, 20.0, 12)
    vector_step(buffer, 1, 12, 1, 30.0, 13)
    data = buffer.transitions()
    rows = {
        (float(o), float(n)): (float(r), float(d))
        for o, n, r, d in zip(
            data["observations"][:, 0],
            data["next_observations"][:, 0],
            data["returns"],
            data["discounts"],
            strict=True,
        )
    }
    assert rows == {
        (0.0, 2.0): (1 + 0.5 * 2, 0.25),  # two steps, bootstrap from s2 (truncated, not terminal)
        (1.0, 2.0): (2.0, 0.5),  # one step left before the truncation
        (10.0, 12.0): (10 + 0.5 * 20, 0.25),
        (11.0, 13.0): (20 + 0.5 * 30, 0.25),
    }
    assert buffer.pending_count == 1  # env 1's last step waits for its second reward
    buffer.end_episodes()  # envs restarted: close the open episode as truncated
    assert len(buffer) == 5 and buffer.pending_count == 0


def test_episode_start_closes_an_open_episode() -> None:
    buffer = ReplayBuffer(10, (1,), observation_dtype=np.float32, n_step=3, gamma=1.0)
    vector_step(buffer, 0, 0, 0, 1.0, 1, start=True)
    vector_step(buffer, 0, 1, 0, 1.0, 2)
    vector_step(buffer, 0, 100, 0, 5.0, 101, start=True)  # new episode (e.g. after a resume)
    data = buffer.transitions()
    np.testing.assert_allclose(data["returns"], [2.0, 1.0])
    np.testing.assert_allclose(data["discounts"], [1.0, 1.0])
    np.testing.assert_array_equal(data["next_observations"][:, 0], [2, 2])


# -- frames ----------------------------------------------------------------------------------


def stacked(frames: list[int], size: int = 3) -> np.ndarray:
    return np.stack([np.full((size, size), f, dtype=np.uint8) for f in frames])


def test_stacked_frames_are_stored_once_and_rebuilt() -> None:
    k = 4
    buffer = ReplayBuffer(50, (k, 3, 3), frame_stack=k, n_step=1, gamma=0.99)
    history = [1, 1, 1, 1]  # a reset repeats its first frame
    for t in range(2, 12):
        nxt = [*history[1:], t]
        buffer.add(Transition(0, stacked(history), 0, 1.0, stacked(nxt), t == 11, False, t == 2))
        history = nxt
    # one frame for the reset (four identical copies) and one per step
    assert buffer._next_frame_id == 1 + 10
    data = buffer.transitions()
    assert data["observations"].shape == (10, k, 3, 3)
    np.testing.assert_array_equal(data["observations"][0][:, 0, 0], [1, 1, 1, 1])
    np.testing.assert_array_equal(data["next_observations"][0][:, 0, 0], [1, 1, 1, 2])
    np.testing.assert_array_equal(data["observations"][9][:, 0, 0], [7, 8, 9, 10])
    np.testing.assert_array_equal(data["next_observations"][9][:, 0, 0], [8, 9, 10, 11])
    assert data["observations"].dtype == np.uint8


def test_capacity_wraps_and_stale_frames_are_never_sampled() -> None:
    buffer = ReplayBuffer(8, (2, 2, 2), frame_stack=2, n_step=1, frame_capacity=9, gamma=0.9)
    history = [0, 0]
    for t in range(1, 40):
        nxt = [history[1], t]
        buffer.add(
            Transition(0, stacked(history, 2), 0, 0.0, stacked(nxt, 2), False, False, t == 1)
        )
        history = nxt
    assert len(buffer) == 8 and buffer.total_added == 39
    batch = buffer.sample(256, np.random.default_rng(0))
    obs = batch.observations[:, :, 0, 0].astype(int)
    nxt = batch.next_observations[:, :, 0, 0].astype(int)
    # every sampled transition is consistent: next = obs shifted by one frame
    np.testing.assert_array_equal(obs[:, 1], nxt[:, 0])
    np.testing.assert_array_equal(nxt[:, 1], obs[:, 1] + 1)
    assert obs.min() >= 39 - 8


def test_state_dict_round_trip_is_exact() -> None:
    buffer = ReplayBuffer(16, (2, 2, 2), frame_stack=2, n_step=3, prioritized=True, gamma=0.9)
    rng = np.random.default_rng(3)
    history = [[0, 0], [50, 50]]
    for t in range(1, 30):
        env = t % 2
        nxt = [history[env][1], t + 50 * env]
        buffer.add(
            Transition(
                env,
                stacked(history[env], 2),
                t % 3,
                float(t),
                stacked(nxt, 2),
                t == 17,
                False,
                t <= 2,
            )
        )
        history[env] = nxt
    batch = buffer.sample(8, rng)
    buffer.update_priorities(batch.indices, rng.random(8), batch.generations)
    copy = buffer.clone_empty()
    copy.load_state_dict({k: v.copy() for k, v in buffer.state_dict().items()})
    for key, value in buffer.transitions().items():
        np.testing.assert_array_equal(copy.transitions()[key], value)
    np.testing.assert_array_equal(copy.priorities(), buffer.priorities())
    assert copy.pending_count == buffer.pending_count and copy.open_streams == buffer.open_streams
    # both continue identically
    for target in (buffer, copy):
        target.add(
            Transition(
                1, stacked(history[1], 2), 1, 9.0, stacked([history[1][1], 99], 2), True, False
            )
        )
    for key, value in buffer.transitions().items():
        np.testing.assert_array_equal(copy.transitions()[key], value)
    other = ReplayBuffer(32, (2, 2, 2), frame_stack=2, n_step=3, prioritized=True)
    with pytest.raises(ValueError, match="capacity"):
        other.load_state_dict(buffer.state_dict())


# -- prioritized sampling ------------------------------------------------------------------------


def filled_prioritized(alpha: float) -> ReplayBuffer:
    buffer = ReplayBuffer(
        8, (1,), observation_dtype=np.float32, prioritized=True, alpha=alpha, priority_eps=0.0
    )
    for t in range(8):
        vector_step(buffer, 0, t, 0, 0.0, t + 1, start=t == 0)
    return buffer


def test_prioritized_sampling_statistics_and_weights() -> None:
    alpha, beta = 0.7, 0.5
    buffer = filled_prioritized(alpha)
    errors = np.array([0.1, 0.5, 1.0, 2.0, 4.0, 0.2, 3.0, 1.5])
    batch = buffer.sample(8, np.random.default_rng(0))
    order = np.arange(8)
    buffer.update_priorities(order, errors, buffer._generation[order])
    expected = errors**alpha / np.sum(errors**alpha)
    rng = np.random.default_rng(4)
    counts = np.zeros(8)
    for _ in range(4000):
        batch = buffer.sample(32, rng, beta=beta)
        counts += np.bincount(batch.indices, minlength=8)
    np.testing.assert_allclose(counts / counts.sum(), expected, atol=0.01)
    # importance weights: (N * P(i)) ** -beta, normalised by the batch maximum
    batch = buffer.sample(64, rng, beta=beta)
    raw = (8 * expected[batch.indices]) ** -beta
    np.testing.assert_allclose(batch.weights, raw / raw.max(), rtol=1e-5)


def test_new_transitions_get_max_priority_and_stale_updates_are_ignored() -> None:
    buffer = filled_prioritized(1.0)
    buffer.update_priorities([0, 1], [5.0, 0.5], buffer._generation[[0, 1]])
    assert buffer.priorities()[0] == pytest.approx(5.0)
    old_generation = buffer._generation[[2]].copy()
    # slot 0 and 1 get overwritten by new transitions: they start at the max priority
    vector_step(buffer, 0, 8, 0, 0.0, 9)
    vector_step(buffer, 0, 9, 0, 0.0, 10)
    assert buffer.priorities()[0] == pytest.approx(5.0) and buffer.priorities()[1] == pytest.approx(
        5.0
    )
    vector_step(buffer, 0, 10, 0, 0.0, 11)  # overwrites slot 2
    buffer.update_priorities([2], [0.01], old_generation)  # sampled before: ignored
    assert buffer.priorities()[2] == pytest.approx(5.0)


def test_uniform_sampling_is_uniform() -> None:
    buffer = ReplayBuffer(10, (1,), observation_dtype=np.float32)
    for t in range(10):
        vector_step(buffer, 0, t, 0, 0.0, t + 1, start=t == 0)
    rng = np.random.default_rng(5)
    counts = np.bincount(
        np.concatenate([buffer.sample(50, rng).indices for _ in range(2000)]), minlength=10
    )
    np.testing.assert_allclose(counts / counts.sum(), 0.1, atol=0.01)
    assert np.all(buffer.sample(50, rng).weights == 1.0)
