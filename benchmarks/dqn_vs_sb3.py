"""OakEmu-RL's DQN against Stable-Baselines3's DQN on the easy bundled game.

Both get the same network (the small CNN torso and one hidden layer of 256, no dueling
head) and OakEmu-RL's default settings: the observation (32x32 grayscale, 2 frames),
replay ratio (one update of 64 transitions per 4 env steps), n-step return, target
period, exploration schedule, learning rate; and the same step budget. Ours runs its
default actor: 8 envs stepped asynchronously in worker processes, a learner thread (with
a thread that prepares its next batch) and a replay-writer thread, float32 throughout;
SB3 runs its default single-env DQN through the Gymnasium registration of the game
(with torch's default thread count). `--bf16` adds a run of ours with the learner in
bfloat16 mixed precision (`learner.precision: bf16`), which SB3 does not offer.
After training, each agent plays the same greedy evaluation episodes. Each contender
trains and plays in a fresh process of its own, so none inherits another's process
settings; ours' process is set up as `oakemu-rl train` sets up its own (it keeps freed
heap memory for reuse: `oakemu_rl.cli.process_setup`).

    .venv/bin/python benchmarks/dqn_vs_sb3.py            # both, 30k steps each
    .venv/bin/python benchmarks/dqn_vs_sb3.py --bf16     # and ours in mixed precision
    .venv/bin/python benchmarks/dqn_vs_sb3.py --steps 10000 --skip-sb3
    .venv/bin/python benchmarks/dqn_vs_sb3.py --bf16 --rounds 3   # medians of 3 rounds

With `--rounds N` every contender runs N times, interleaved (the order rotates from
round to round), and the table shows medians: on a shared VM one run of either side
varies by 5-10% (SB3's most of all: its OpenMP threads spin on cores it may not get).

SB3 is optional (`pip install -e '.[bench]'`); without it only ours runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cpu_accounting import RunCPU, bound_report
from isolation import run_isolated
from oakemu_rl.cli.process_setup import keep_freed_memory
from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.dqn.model import _small_cnn
from oakemu_rl.envs import OakEmuEnv, ObservationConfig
from oakemu_rl.experiments import DQNExperiment, find_checkpoint
from oakemu_rl.runtime.env_owner import make_multi_env

DEFAULTS = DQNExperimentConfiguration()
OBSERVATION = DEFAULTS.env.observation.model_dump()
EVAL_SEED = 777_000


def shared_settings(steps: int) -> dict[str, Any]:
    """The settings both agents get: OakEmu-RL's defaults."""
    learner, replay, exploration = DEFAULTS.learner, DEFAULTS.replay, DEFAULTS.exploration
    return {
        "learning_rate": learner.learning_rate,
        "adam_eps": learner.adam_eps,
        "gamma": learner.gamma,
        "batch_size": learner.batch_size,
        "learning_starts": learner.learning_starts,
        "replay_ratio": learner.replay_ratio,
        "target_period_updates": learner.target.period,
        "n_step": replay.n_step,
        "capacity": replay.capacity,
        "epsilon_start": exploration.epsilon_start,
        "epsilon_end": exploration.epsilon_end,
        "epsilon_decay_steps": min(exploration.decay_steps, steps),
        "max_grad_norm": learner.max_grad_norm,
        "head_hidden": DEFAULTS.model.head_hidden,
    }


# -- ours ------------------------------------------------------------------------------------


def run_ours(
    game: str, steps: int, seed: int, run_dir: Path, shared: dict[str, Any], precision: str
) -> dict[str, Any]:
    keep_freed_memory()  # ours' process is set up as `oakemu-rl train` sets up its own
    config = DQNExperimentConfiguration.from_dict(
        {
            "game": game,
            "total_steps": steps,
            "seed": seed,
            "env": {"observation": OBSERVATION},
            "model": {"torso": "small_cnn", "head_hidden": shared["head_hidden"], "dueling": False},
            "exploration": {
                "type": "linear",
                "epsilon_start": shared["epsilon_start"],
                "epsilon_end": shared["epsilon_end"],
                "decay_steps": shared["epsilon_decay_steps"],
            },
            "learner": {
                "learning_rate": shared["learning_rate"],
                "adam_eps": shared["adam_eps"],
                "gamma": shared["gamma"],
                "batch_size": shared["batch_size"],
                "learning_starts": shared["learning_starts"],
                "replay_ratio": shared["replay_ratio"],
                "double_dqn": False,  # SB3's DQN has no double-DQN targets
                "max_grad_norm": shared["max_grad_norm"],
                "target": {"type": "hard", "period": shared["target_period_updates"]},
                "precision": precision,
            },
            "replay": {"capacity": shared["capacity"], "n_step": shared["n_step"]},
            "tester": {"enabled": False},
            "checkpoint": {"every_steps": 10**9},
            "logging": {"console": False, "tensorboard": False},
        }
    )
    run_cpu = RunCPU()
    experiment = DQNExperiment(
        config, run_dir, console=False, print_fn=lambda _: None,
        env_factory=run_cpu.wrap_env_factory(lambda: make_multi_env(config)),
    )  # fmt: skip
    experiment.build()  # worker processes started: CPU time, like steps/s, counts training
    run_cpu.start()
    summary = experiment.run()
    cpu = run_cpu.stop()
    checkpoint = find_checkpoint(run_dir)
    env = OakEmuEnv(game, ObservationConfig(**OBSERVATION))
    model = DQNExperiment.build_model(config, env.observation_space.shape, env.num_actions)
    model.load_state_dict(checkpoint.load_torch("model.pt")["learner"])
    model.eval()
    env.close()

    def act(obs: np.ndarray) -> int:
        with torch.inference_mode():
            return int(model(torch.from_numpy(obs[None])).argmax(1).item())

    return {
        "train_s": summary["session_s"],
        "steps": summary["steps"],
        "updates": summary["updates"],
        "cpu_s": cpu,
        "act": act,
    }


# -- SB3 ----------------------------------------------------------------------------------------


def run_sb3(
    game: str, steps: int, seed: int, shared: dict[str, Any], n_envs: int
) -> dict[str, Any]:
    import gymnasium as gym
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    import oakemu_rl.envs  # noqa: F401  (registers the oakemu/<game> Gymnasium ids)

    class SmallCNN(BaseFeaturesExtractor):  # type: ignore[misc]
        """The same torso as OakEmu-RL's small_cnn."""

        def __init__(self, observation_space: gym.spaces.Box) -> None:
            torso = _small_cnn(observation_space.shape[0])
            with torch.no_grad():
                features = int(torso(torch.zeros(1, *observation_space.shape)).shape[1])
            super().__init__(observation_space, features)
            self.torso = torso

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            return self.torso(observations)  # type: ignore[no-any-return]

    env_id = f"oakemu_rl.envs:oakemu/{game}"
    vec_env = make_vec_env(
        env_id, n_envs=n_envs, seed=seed, env_kwargs={"observation_config": OBSERVATION}
    )
    ratio = shared["replay_ratio"]
    train_freq = max(1, round(1 / (ratio * n_envs)))
    model = DQN(
        "CnnPolicy",
        vec_env,
        learning_rate=shared["learning_rate"],
        buffer_size=shared["capacity"],
        learning_starts=shared["learning_starts"],
        batch_size=shared["batch_size"],
        gamma=shared["gamma"],
        train_freq=train_freq,
        gradient_steps=max(1, round(ratio * n_envs * train_freq)),
        n_steps=shared["n_step"],
        target_update_interval=int(shared["target_period_updates"] / ratio),
        exploration_fraction=shared["epsilon_decay_steps"] / steps,
        exploration_initial_eps=shared["epsilon_start"],
        exploration_final_eps=shared["epsilon_end"],
        max_grad_norm=shared["max_grad_norm"],
        policy_kwargs={
            "features_extractor_class": SmallCNN,
            "net_arch": [shared["head_hidden"]],
            "optimizer_kwargs": {"eps": shared["adam_eps"]},
        },
        seed=seed,
        device="cpu",
        verbose=0,
    )
    run_cpu = RunCPU()
    start = time.monotonic()
    run_cpu.start()
    model.learn(total_timesteps=steps)
    train_s = time.monotonic() - start
    cpu = run_cpu.stop()
    vec_env.close()

    def act(obs: np.ndarray) -> int:
        action, _ = model.predict(obs, deterministic=True)
        return int(action)

    return {
        "train_s": train_s,
        "steps": steps,
        "updates": model._n_updates,
        "cpu_s": cpu,
        "act": act,
    }


# -- evaluation ---------------------------------------------------------------------------


def evaluate(game: str, act: Callable[[np.ndarray], int], episodes: int) -> dict[str, float]:
    """The same greedy episodes for both agents (same env seeds)."""
    env = OakEmuEnv(game, ObservationConfig(**OBSERVATION))
    returns, scores, wins = [], [], 0
    for episode in range(episodes):
        obs, info = env.reset(seed=EVAL_SEED + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(act(obs))
            total += reward
            done = terminated or truncated
        returns.append(total)
        scores.append(float(info["score"]))
        wins += info["outcome"] == "win"
    env.close()
    return {
        "mean_return": float(np.mean(returns)),
        "mean_score": float(np.mean(scores)),
        "win_rate": wins / episodes,
    }


def report(name: str, result: dict[str, Any]) -> None:
    """One line per contender as soon as it is done (the table comes at the end)."""
    print(
        f"  {name}: {result['steps'] / result['train_s']:,.0f} env steps/s "
        f"({result['steps']:,} steps in {result['train_s']:.1f} s, {result['updates']:,} updates), "
        f"greedy return {result['mean_return']:.2f}, win rate {result['win_rate']:.0%}",
        flush=True,
    )


def train_and_evaluate(
    name: str, args: argparse.Namespace, shared: dict[str, Any], run_dir: Path
) -> dict[str, Any]:
    """Train one contender and play its evaluation episodes (in a process of its own)."""
    if name == "sb3":
        torch.set_num_threads(args.sb3_threads or torch.get_num_threads())
        trained = run_sb3(args.game, args.steps, args.seed, shared, args.sb3_envs)
    else:
        precision = "bf16" if name.endswith("bf16") else "fp32"
        trained = run_ours(args.game, args.steps, args.seed, run_dir / name, shared, precision)
    result = {k: v for k, v in trained.items() if k != "act"}
    result.update(evaluate(args.game, trained["act"], args.eval_episodes))
    return result


def median_result(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One contender's rounds: medians of the speed figures, the worst greedy figures."""
    result = dict(runs[0])
    for key in ("train_s", "cpu_s", "env_steps_per_s", "cpu_ms_per_step", "updates"):
        result[key] = float(np.median([run[key] for run in runs]))
    for key in ("mean_return", "mean_score", "win_rate"):
        result[key] = min(run[key] for run in runs)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="catch", help="bundled game (default: catch)")
    parser.add_argument("--steps", type=int, default=30_000, help="env steps for each agent")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--sb3-envs", type=int, default=1, help="SB3 envs (DummyVecEnv)")
    parser.add_argument(
        "--sb3-threads", type=int, default=0, help="torch threads for SB3 (0: torch's default)"
    )
    parser.add_argument(
        "--replay-ratio", type=float, help="updates per env step for both (default: ours, 0.25)"
    )
    parser.add_argument("--batch-size", type=int, help="batch size for both (default: ours, 64)")
    parser.add_argument("--skip-sb3", action="store_true", help="run only ours")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="also run ours with learner.precision=bf16 (mixed precision; SB3 has none)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every contender this many times, interleaved; the table shows medians",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress lines
    shared = shared_settings(args.steps)
    if args.replay_ratio is not None:
        shared["replay_ratio"] = args.replay_ratio
    if args.batch_size is not None:
        shared["batch_size"] = args.batch_size
    print("shared settings: " + ", ".join(f"{k}={v}" for k, v in shared.items()))
    names = ["ours"] + (["ours-bf16"] if args.bf16 else [])
    if args.skip_sb3:
        print("SB3: skipped (--skip-sb3)")
    elif importlib.util.find_spec("stable_baselines3") is None:
        print("SB3: skipped (stable-baselines3 is not installed: pip install -e '.[bench]')")
    else:
        names.append("sb3")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    run_dir = Path(tempfile.mkdtemp(prefix="dqn_vs_sb3-"))
    try:
        for index in range(args.rounds):
            order = names[index % len(names) :] + names[: index % len(names)]
            label = f" (round {index + 1} of {args.rounds})" if args.rounds > 1 else ""
            for name in order:
                print(f"{name}: {args.steps:,} steps on {args.game} (own process){label} ...")
                result = run_isolated(train_and_evaluate, name, args, shared, run_dir / str(index))
                result["env_steps_per_s"] = result["steps"] / result["train_s"]
                result["cpu_ms_per_step"] = 1000 * result["cpu_s"] / result["steps"]
                rounds[name].append(result)
                report(name, result)
            if "sb3" in rounds and args.rounds > 1:
                sb3 = rounds["sb3"][-1]["env_steps_per_s"]
                ratios = [
                    f"{n}/sb3 {rounds[n][-1]['env_steps_per_s'] / sb3:.2f}x"
                    for n in names
                    if n != "sb3"
                ]
                print(f"round {index + 1}: " + ", ".join(ratios))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)

    results = {name: median_result(runs) for name, runs in rounds.items()}
    rows = [
        ("env steps/s", "env_steps_per_s", "{:,.0f}"),
        ("training time (s)", "train_s", "{:,.1f}"),
        ("learner updates", "updates", "{:,.0f}"),
        ("CPU ms per env step", "cpu_ms_per_step", "{:.3f}"),
        (f"greedy mean return ({args.eval_episodes} ep)", "mean_return", "{:.2f}"),
        ("greedy mean score", "mean_score", "{:.2f}"),
        ("greedy win rate", "win_rate", "{:.0%}"),
    ]
    names = list(results)
    ratios = [n for n in names if n != "sb3"] if "sb3" in results else []
    print()
    if args.rounds > 1:
        print(f"medians of {args.rounds} rounds (greedy figures: the worst round)")
    print(
        f"{'':32}"
        + "".join(f"{n:>14}" for n in names)
        + "".join(f"{n + '/sb3':>16}" for n in ratios)
    )
    for label, key, fmt in rows:
        line = f"{label:32}" + "".join(f"{fmt.format(results[n][key]):>14}" for n in names)
        if key in ("env_steps_per_s", "train_s", "cpu_ms_per_step"):
            for n in ratios:
                a, b = results[n][key], results["sb3"][key]
                line += f"{(a / b if b else math.inf):>15.2f}x"
        print(line)
    for n in ratios:
        print(f"\n{n} against sb3:")
        print(
            bound_report(
                {"steps_per_s": results[n]["env_steps_per_s"], **results[n]},
                {"steps_per_s": results["sb3"]["env_steps_per_s"], **results["sb3"]},
            )
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": vars(args) | {"json": str(args.json)},
                    "results": results,
                    "rounds": rounds,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
