"""PPO's behaviour-cloning loss on demonstrations.

The demonstrations are played here on the bundled game catch by a scripted policy that
moves the basket under the ball, read from the game's variables (catch.yaml: ball_x,
paddle_x; the basket is 6 columns wide), and saved as trajectory files. Each is played
with two observations at once (the default screen and RAM), so that the observations
rebuilt from the files can be compared with those seen while playing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from oakemu_rl.envs.oakemu_env import OakEmuEnv
from oakemu_rl.envs.observation import ObservationConfig
from oakemu_rl.experiments.ppo_experiment import PPOExperiment
from oakemu_rl.games.loader import GameDefinition, load_game
from oakemu_rl.ppo.actor import PPOActor
from oakemu_rl.ppo.bc import (
    BCMaterialisationSource,
    BCSampler,
    ReplayObservationCache,
    bc_coefficient,
)
from oakemu_rl.ppo.config import PPOBCSettings, PPOExperimentConfiguration
from oakemu_rl.trajectories.demonstrations import DemonstrationSet
from oakemu_rl.trajectories.trajectory_file import Trajectory
from ppo_testing import build_components
from trajectory_testing import catch_policy

SCREEN = ObservationConfig(height=32, width=32, frame_stack=2)  # what the runs see
RAM = ObservationConfig(type="ram", ram=["ball_x", "ball_y", "paddle_x"], frame_stack=1)
DEMOS = 3
DEMO_STEPS = 250  # about 6 blocks each: a prefix of the 946-step winning episode
STRIDE = 10  # steps between the states saved along each demonstration


@dataclass
class Demos:
    game: GameDefinition
    directory: Path
    actions: list[np.ndarray]
    screen: list[list[np.ndarray]]  # observations seen while playing, per demonstration
    ram: list[list[np.ndarray]]

    def load(self, observation: ObservationConfig) -> DemonstrationSet:
        found = DemonstrationSet.load([self.directory], self.game, observation, STRIDE)
        found.prepare()
        return found


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Demos:
    game = load_game("catch")
    directory = tmp_path_factory.mktemp("demos")
    screen_env, ram_env = OakEmuEnv(game, SCREEN), OakEmuEnv(game, RAM)
    result = Demos(game, directory, [], [], [])
    for i in range(DEMOS):
        screen_obs, info = screen_env.reset(seed=100 + i)
        seed = info["episode_seed"]
        ram_obs, _ = ram_env.reset(options={"episode_seed": seed})
        actions, rewards, screens, rams = [], [], [], []
        for _ in range(DEMO_STEPS):
            action = catch_policy(info["values"])
            screens.append(screen_obs.copy())
            rams.append(ram_obs.copy())
            actions.append(action)
            screen_obs, reward, terminated, truncated, info = screen_env.step(action)
            ram_obs, *_ = ram_env.step(action)
            rewards.append(reward)
            assert not (terminated or truncated)
        Trajectory(
            game=game.name,
            game_file=str(game.path),
            game_sha256=game.yaml_sha256,
            actions=np.array(actions),
            rewards=np.array(rewards),
            start_seed=seed,
            episode_return=float(sum(rewards)),
            source="demo",
        ).save(directory / f"demo{i}.trajectory.json")
        result.actions.append(np.array(actions))
        result.screen.append(screens)
        result.ram.append(rams)
    screen_env.close()
    ram_env.close()
    return result


def test_cache_is_bounded_in_bytes_and_drops_the_least_recently_used() -> None:
    cache = ReplayObservationCache(max_bytes=300)
    small, large = np.zeros(100, np.uint8), np.zeros(50, np.float32)  # 100 and 200 bytes
    assert cache.put(0, 0, small) and cache.put(0, 1, small) and cache.put(0, 2, small)
    assert cache.nbytes == 300 and not cache.fits(1)
    assert cache.get(0, 0) is not None  # now the most recently used
    assert cache.put(1, 0, large)  # 200 bytes: drops (0, 1) and (0, 2), the least recent
    assert (0, 1) not in cache and (0, 2) not in cache and (0, 0) in cache
    assert cache.nbytes == 300 and len(cache) == 2
    assert cache.put(1, 0, small) and cache.nbytes == 200  # replacing counts the new size
    assert not cache.put(2, 0, np.zeros(301, np.uint8))  # larger than the whole cache
    assert cache.nbytes == 200 and len(cache) == 2
    stored = cache.get(0, 0)
    assert stored is not None and not stored.flags.writeable


def test_the_coefficient_falls_linearly_then_stays() -> None:
    settings = PPOBCSettings(coef=1.0, final_coef=0.2, decay_steps=1000)
    assert bc_coefficient(settings, 0) == 1.0
    assert bc_coefficient(settings, 250) == pytest.approx(0.8)
    assert bc_coefficient(settings, 500) == pytest.approx(0.6)
    assert bc_coefficient(settings, 1000) == pytest.approx(0.2)
    assert bc_coefficient(settings, 50_000) == pytest.approx(0.2)
    rising = PPOBCSettings(coef=0.0, final_coef=2.0, decay_steps=10)
    assert bc_coefficient(rising, 5) == pytest.approx(1.0)


def test_observations_served_through_the_actor_are_those_seen_while_playing(
    demos: Demos, tmp_path: Path
) -> None:
    demonstrations = demos.load(SCREEN)
    cache, source = ReplayObservationCache(2**20), BCMaterialisationSource()
    sampler = BCSampler(demonstrations, cache, source, 64, np.random.default_rng(0))
    assert sampler.steps == DEMOS * DEMO_STEPS
    assert sampler.sample() is None  # nothing cached: no BC this time, nothing waits
    assert source.pending > 0 and sampler.skipped == 1

    # The actor side: a PPOActor of a run with these demonstrations serves the requests.
    c = build_components(tmp_path)
    c.context.demonstrations = demonstrations
    actor = PPOActor(
        c.context, c.actor_model, c.container, c.buffer, c.handshake,
        replay_observation_cache=cache,
    )  # fmt: skip
    actor.set_bc_materialisation_source(source)
    served = actor.materialise_bc_requests()
    assert served == actor.bc_materialised == len(cache) > 32 and source.pending == 0

    batch = sampler.sample()  # the steps drawn first, now cached, and new ones that are
    assert batch is not None and served <= len(batch.keys) <= 64
    for observation, action, (demo_id, step) in zip(
        batch.observations, batch.actions, batch.keys, strict=True
    ):
        assert np.array_equal(observation, demos.screen[demo_id][step])
        assert observation.dtype == demos.screen[demo_id][step].dtype
        assert action == demos.actions[demo_id][step]
    assert sampler.samples == 2 and sampler.skipped == 1
    demonstrations.close()


def bc_config(run: dict[str, Any] | None = None, **sections: dict[str, Any]) -> dict[str, Any]:
    """A PPO configuration on catch with a behaviour-cloning loss."""
    data: dict[str, Any] = {
        "game": "catch",
        "seed": 0,
        "torch_threads": 1,  # tiny networks: more threads only contend for the cores
        "env": {"num_envs": 2, "backend": "inline", "observation": SCREEN.model_dump()},
        "tester": {"enabled": False},
        "restart_pool": {"save_every_steps": STRIDE},
        "demos": {"backplay": False},
        "logging": {"tensorboard": False, "console": False},
    }
    data.update(run or {})
    for name, section in sections.items():
        data[name] = {**data.get(name, {}), **section}
    return data


def test_bc_alone_makes_the_policy_match_the_demonstrations_on_catch(
    demos: Demos, tmp_path: Path
) -> None:
    """The PPO learner's own update with its PPO terms off (no advantages, no value or
    entropy weight): what is left is the BC loss on the demonstrations."""
    config = PPOExperimentConfiguration.from_dict(
        bc_config(
            env={"observation": RAM.model_dump()},
            model={"input_scale": 1 / 8},
            ppo={
                "rollout_steps": 8,
                "epochs": 4,
                "minibatches": 4,
                "learning_rate": 3e-3,
                "anneal_lr": False,
                "ent_coef": 0.0,
                "vf_coef": 0.0,
            },
            demos={"paths": [str(demos.directory)]},
            bc={"batch_size": 128},
        )
    )
    experiment = PPOExperiment(config, tmp_path / "run", console=False, print_fn=lambda _: None)
    experiment.build()
    try:
        learner, buffer = experiment.learner, experiment.rollout_buffer
        assert learner.bc_sampler is not None
        assert len(learner.bc_sampler.cache) == DEMOS * DEMO_STEPS  # all prefilled
        # A full rollout of zero rewards and values: zero advantages and returns.
        zeros = np.zeros(buffer.observation_shape, buffer.observations.dtype)
        for _ in range(buffer.num_steps):
            for env_id in range(buffer.num_envs):
                buffer.add_action(env_id, zeros, 0, 0.0, 0.0)
                buffer.add_outcome(env_id, 0.0, False, False)
        buffer.end_step = 0
        observations = torch.from_numpy(np.stack([o for demo in demos.ram for o in demo]))
        actions = torch.from_numpy(np.concatenate(demos.actions))

        def agreement() -> float:
            return float((learner.model.greedy_actions(observations) == actions).float().mean())

        before = agreement()
        threads = torch.get_num_threads()
        experiment.context.enter_thread()  # as the learner thread does
        try:
            for _ in range(30):
                metrics = learner.train_on_rollout(buffer)
        finally:
            torch.set_num_threads(threads)
        after = agreement()  # 0.99 when written (0.22 before)
        assert after > 0.9, (before, after, metrics)
        assert metrics["train/policy_loss"] == 0.0 and metrics["train/bc_coef"] == 1.0
        assert metrics["train/bc_minibatches"] == 16.0
        assert metrics["train/bc_agreement"] > 0.85 and metrics["train/bc_loss"] < 0.5
        assert metrics["train/bc_cache_hit_rate"] == 1.0
    finally:
        experiment.close()


def test_a_run_with_demonstrations_logs_bc_checkpoints_and_resumes(
    demos: Demos, tmp_path: Path
) -> None:
    """The cache holds a third of the demonstration steps, so the actor rebuilds the
    others as the sampler asks; the second session overlaps collection with training."""
    observation_bytes = int(np.prod((SCREEN.frame_stack, SCREEN.height, SCREEN.width)))
    data = bc_config(
        {"total_steps": 128},
        checkpoint={"every_steps": 64},
        ppo={"rollout_steps": 16},
        demos={"paths": [str(demos.directory)]},
        bc={"batch_size": 32, "cache_bytes": DEMO_STEPS * observation_bytes, "decay_steps": 256},
    )
    run_dir = tmp_path / "run"
    lines: list[str] = []
    first = PPOExperiment(
        PPOExperimentConfiguration.from_dict(data), run_dir, console=False, print_fn=lines.append
    )
    summary = first.run()
    assert summary["steps"] == 128 and summary["rollouts"] == 4
    assert any(f"{DEMO_STEPS:,} of {DEMOS * DEMO_STEPS:,} demonstration steps" in x for x in lines)
    logged = first.memory.history
    steps, coefs = zip(*logged["train/bc_coef"], strict=True)
    assert steps == (32, 64, 96, 128) and coefs == pytest.approx([1 - s / 256 for s in steps])
    assert logged["train/bc_loss"] and logged["train/bc_agreement"]
    assert first.actor.bc_materialised > 0
    cache = first.actor.replay_observation_cache
    assert cache is not None and len(cache) == DEMO_STEPS
    for demo_id in range(DEMOS):
        for step, seen in enumerate(demos.screen[demo_id]):
            cached = cache.get(demo_id, step)
            assert cached is None or np.array_equal(cached, seen), (demo_id, step)

    data["total_steps"] = 256
    data["ppo"]["overlap_collection"] = True
    resumed = PPOExperiment(
        PPOExperimentConfiguration.from_dict(data),
        run_dir,
        resume=True,
        console=False,
        print_fn=lines.append,
    )
    summary = resumed.run()
    assert summary["resumed_from_step"] == 128 and summary["steps"] == 256
    assert summary["rollouts"] == 8
    # The schedule goes on from the checkpoint's step; at 0 the BC loss is left out.
    logged = resumed.memory.history
    steps, coefs = zip(*logged["train/bc_coef"], strict=True)
    assert steps == (160, 192, 224, 256) and coefs == pytest.approx([1 - s / 256 for s in steps])
    assert {s for s, _ in logged["train/bc_loss"]} <= {160, 192, 224}


def test_demonstrations_without_learn_add_no_bc(demos: Demos, tmp_path: Path) -> None:
    data = bc_config(demos={"paths": [str(demos.directory)], "learn": False})
    experiment = PPOExperiment(
        PPOExperimentConfiguration.from_dict(data),
        tmp_path / "run",
        console=False,
        print_fn=lambda _: None,
    )
    experiment.build()
    try:
        assert experiment.context.demonstrations is not None
        assert experiment.learner.bc_sampler is None and experiment.bc_source is None
        assert experiment.actor.replay_observation_cache is None
        assert "bc_sampler" not in experiment.learner.state_dict()
    finally:
        experiment.close()
