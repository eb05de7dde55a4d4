"""OakEmu-RL's PPO against Stable-Baselines3's PPO: same env, network, hyper-parameters, budget.

    python benchmarks/ppo_vs_sb3.py                       # catch, RAM observation, 30k steps
    python benchmarks/ppo_vs_sb3.py --steps 50000 --sb3-vec subproc
    python benchmarks/ppo_vs_sb3.py --game gym:CartPole-v1 --steps 50000

Both train an actor-critic with a shared 64x64 tanh MLP torso and linear policy and
value heads (SB3: a custom shared features extractor and an empty `net_arch`), with
the same PPO settings (rollout length, epochs, minibatch size, clip ranges, learning
rate annealed linearly to 0, GAE, coefficients, gradient clipping), the same number of
envs and the same env-step budget, and one torch thread each. Throughput is env steps
per second of wall time over the whole training (collection and learning). Each
trained policy is then evaluated the same way (each run trains and plays in a fresh
process of its own): greedy actions, `--eval-episodes`
episodes played one after another on a fresh env with fixed seeds.

OakEmu-RL steps its envs asynchronously in worker processes (`--workers`, default:
one per core); SB3 steps them in lockstep, in this process (`DummyVecEnv`, SB3's
default) or in one process per env (`--sb3-vec subproc`).

Both take the value loss in SB3's form, the squared error of the clipped value
prediction (ours: `ppo.value_loss_form: clipped`; its default, CleanRL's larger of the
clipped and unclipped errors, learnt catch less reliably: greedy return -1.8 and 16.3 on
two of six seeds at this budget; with SB3's form 30 on five and 26.6 on the sixth).
Ours writes it as vf_coef x 0.5 x error, SB3 as vf_coef x error: ours gets twice SB3's `vf_coef`
(`--vf-coef`, in SB3's terms: 0.5, so ours 1.0), the same weight. Both clip the value
change to `--value-clip` (0.2, as the policy ratio; `none`: no clipping for either, SB3's
default). `--overlap` lets ours collect the next rollout while it trains on the last
(`ppo.overlap_collection`; SB3 has no such mode). The script prints every shared setting.

The greedy score of a policy still in training is fragile: a policy that plays well
when sampled can lose with argmax actions on some states. `--sampled-eval` adds an
evaluation with sampled actions (the same for both), which shows how far training
got; the target is judged on the greedy score. Each seed gets its own line, and
with several seeds the per-seed table and the means follow.

SB3 is optional: without it the script runs OakEmu-RL alone and says so.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import torch
from torch import nn

from cpu_accounting import RunCPU, bound_report, cores
from isolation import run_isolated
from oakemu_rl.cli.process_setup import keep_freed_memory
from oakemu_rl.envs.factory import make_env
from oakemu_rl.experiments import PPOExperiment
from oakemu_rl.ppo.config import PPOExperimentConfiguration
from oakemu_rl.runtime.env_owner import make_multi_env

RAM_OBSERVATION = {"type": "ram", "ram": ["ball_x", "ball_y", "paddle_x"], "frame_stack": 1}

Policy = Callable[[np.ndarray], int]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--game", default="catch", help="catch (RAM observation) or gym:<id>")
    p.add_argument("--steps", type=int, default=30_000, help="env steps of each run")
    p.add_argument("--envs", type=int, default=8)
    p.add_argument("--workers", type=int, default=None, help="our worker processes")
    p.add_argument(
        "--backend",
        choices=["process", "inline"],
        default="process",
        help="our envs in worker processes (default) or in this process, like DummyVecEnv",
    )
    p.add_argument("--sb3-vec", choices=["dummy", "subproc"], default="dummy")
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.add_argument(
        "--seeds", type=int, default=1, help="seeds to run (ours and SB3 alternate per seed)"
    )
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--eval-max-steps", type=int, default=1000)
    p.add_argument("--rollout-steps", type=int, default=64)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--lr", type=float, default=2.5e-3)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument(
        "--vf-coef",
        type=float,
        default=0.5,
        help="value-loss weight in SB3's terms (mean squared error); ours gets twice it, "
        "as its value loss carries a factor 0.5",
    )
    p.add_argument(
        "--value-clip",
        type=_value_clip,
        default=0.2,
        help="clip range of the value change, for both (none: no value clipping)",
    )
    p.add_argument(
        "--overlap",
        action="store_true",
        help="ours collects the next rollout while training on the last (overlap_collection)",
    )
    p.add_argument(
        "--sampled-eval",
        action="store_true",
        help="also evaluate both policies with sampled (not greedy) actions",
    )
    return p.parse_args(argv)


def _value_clip(text: str) -> float | None:
    return None if text.lower() == "none" else float(text)


def shared_settings(args: argparse.Namespace) -> str:
    """The settings both sides get, in one line."""
    batch = args.envs * args.rollout_steps
    clip_vf = "off" if args.value_clip is None else f"{args.value_clip:g}"
    return (
        f"both: {args.envs} envs x {args.rollout_steps} steps per rollout, {args.epochs} epochs "
        f"of {args.minibatches} minibatches of {batch // args.minibatches}, lr {args.lr:g} "
        f"annealed linearly to 0, Adam eps 1e-5, gamma 0.99, GAE lambda 0.95, clip 0.2, "
        f"value clip {clip_vf}, ent_coef {args.ent_coef:g}, value-error weight {args.vf_coef:g} "
        f"(SB3 vf_coef {args.vf_coef:g} x MSE = ours {2 * args.vf_coef:g} x 0.5 MSE), "
        "max_grad_norm 0.5, "
        f"advantages normalised per minibatch, orthogonal init, obs x {input_scale(args.game):g}, "
        "one torch thread"
    )


def input_scale(game: str) -> float:
    return 1 / 32 if not game.startswith("gym:") else 1.0


def observation_config(game: str) -> dict[str, Any] | None:
    return None if game.startswith("gym:") else RAM_OBSERVATION


# -- evaluation, the same for both ------------------------------------------------------------


def evaluate(
    game: str, policy: Policy, episodes: int, max_steps: int, seed: int
) -> dict[str, float]:
    """Greedy episodes one after another on a fresh env; mean return and mean game score."""
    env = make_env(game, observation_config(game))
    returns, scores = [], []
    try:
        for i in range(episodes):
            obs, info = env.reset(seed=seed + 10_000 + i)
            total, score = 0.0, 0.0
            for _ in range(max_steps):
                obs, reward, terminated, truncated, info = env.step(policy(obs))
                total += float(reward)
                score = float(info.get("score") or 0.0)
                if terminated or truncated:
                    break
            returns.append(total)
            scores.append(score)
    finally:
        env.close()
    return {"mean_return": float(np.mean(returns)), "mean_score": float(np.mean(scores))}


# -- OakEmu-RL ----------------------------------------------------------------------------------


def run_ours(args: argparse.Namespace) -> dict[str, Any]:
    keep_freed_memory()  # ours' process is set up as `oakemu-rl train` sets up its own
    torch.set_num_threads(1)
    env: dict[str, Any] = {
        "num_envs": args.envs,
        "num_workers": args.workers,
        "backend": args.backend,
    }
    if observation_config(args.game) is not None:
        env["observation"] = observation_config(args.game)
    config = PPOExperimentConfiguration.from_dict(
        {
            "game": args.game,
            "total_steps": args.steps,
            "seed": args.seed,
            "torch_threads": 1,
            "env": env,
            "model": {
                "mlp_hidden": [64, 64],
                "activation": "tanh",
                "input_scale": input_scale(args.game),
            },
            "ppo": {
                "rollout_steps": args.rollout_steps,
                "learning_rate": args.lr,
                "anneal_lr": True,
                "epochs": args.epochs,
                "minibatches": args.minibatches,
                "ent_coef": args.ent_coef,
                "clip_coef": 0.2,
                "clip_value_loss": args.value_clip is not None,
                "value_clip_coef": args.value_clip,
                "value_loss_form": "clipped",  # SB3's form
                "vf_coef": 2 * args.vf_coef,  # ours: vf_coef x 0.5 x squared error
                "overlap_collection": args.overlap,
                "max_grad_norm": 0.5,
                "gamma": 0.99,
                "gae_lambda": 0.95,
            },
            "tester": {"enabled": False},
            "rollback": {"enabled": False},
            "checkpoint": {"every_steps": 10**9},
            "logging": {"tensorboard": False, "console": False},
        }
    )
    run_cpu = RunCPU()

    with TemporaryDirectory() as tmp:
        experiment = PPOExperiment(
            config, Path(tmp) / "run", console=False, print_fn=lambda _: None,
            env_factory=run_cpu.wrap_env_factory(lambda: make_multi_env(config)),
        )  # fmt: skip
        start = time.perf_counter()
        # Built first (worker processes started), so that CPU time, like SB3's and like
        # the steps/s of both, counts training only, not start-up.
        experiment.build()
        run_cpu.start()
        summary = experiment.run()
        wall = time.perf_counter() - start
        cpu = run_cpu.stop()
        model = experiment.learner_model.eval()

    def policy(obs: np.ndarray) -> int:
        with torch.no_grad():
            return int(model.greedy_actions(torch.as_tensor(obs)[None])[0])

    result = evaluate(args.game, policy, args.eval_episodes, args.eval_max_steps, args.seed)
    if args.sampled_eval:
        generator = torch.Generator().manual_seed(args.seed)

        def sampled(obs: np.ndarray) -> int:
            with torch.no_grad():
                bundle = model.get_action_bundle(torch.as_tensor(obs)[None], generator=generator)
            return int(bundle.actions[0])

        sampled_result = evaluate(
            args.game, sampled, args.eval_episodes, args.eval_max_steps, args.seed
        )
        result["sampled_return"] = sampled_result["mean_return"]
    return {
        "name": (
            f"OakEmu-RL PPO ({experiment.env.num_workers} workers, async)"
            if args.backend == "process"
            else "OakEmu-RL PPO (inline)"
        ),
        "steps": summary["steps"],
        "wall_s": wall,
        "steps_per_s": summary["env_steps_per_s"],
        "cpu_ms_per_step": 1000 * cpu / max(1, summary["steps"]),
        **result,
    }


# -- Stable-Baselines3 ---------------------------------------------------------------------------


def run_sb3(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(1)
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    scale = input_scale(args.game)

    class SharedMLP(BaseFeaturesExtractor):  # type: ignore[misc]
        """The same torso as OakEmu-RL's PPOModel: scale, then 64x64 tanh."""

        def __init__(self, observation_space: gym.Space[Any]) -> None:
            super().__init__(observation_space, features_dim=64)
            size = math.prod(observation_space.shape or (1,))
            self.net = nn.Sequential(
                nn.Flatten(), nn.Linear(size, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh()
            )

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.net(observations.float() * scale)
            return out

    game, obs_config = args.game, observation_config(args.game)
    vec_cls = SubprocVecEnv if args.sb3_vec == "subproc" else DummyVecEnv
    vec_env = make_vec_env(
        lambda: make_env(game, obs_config), n_envs=args.envs, seed=args.seed, vec_env_cls=vec_cls
    )
    lr = args.lr
    model = PPO(
        "MlpPolicy",
        vec_env,
        learning_rate=lambda progress_remaining: lr * progress_remaining,
        n_steps=args.rollout_steps,
        batch_size=args.envs * args.rollout_steps // args.minibatches,
        n_epochs=args.epochs,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        clip_range_vf=args.value_clip,
        normalize_advantage=True,
        ent_coef=args.ent_coef,
        vf_coef=args.vf_coef,
        max_grad_norm=0.5,
        policy_kwargs={
            "features_extractor_class": SharedMLP,
            "net_arch": [],
            "share_features_extractor": True,
            "optimizer_kwargs": {"eps": 1e-5},
        },
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    run_cpu = RunCPU()
    start = time.perf_counter()
    run_cpu.start()
    model.learn(total_timesteps=args.steps)
    wall = time.perf_counter() - start
    cpu = run_cpu.stop()
    steps = int(model.num_timesteps)
    vec_env.close()

    def policy(obs: np.ndarray) -> int:
        action, _ = model.predict(obs, deterministic=True)
        return int(action)

    result = evaluate(args.game, policy, args.eval_episodes, args.eval_max_steps, args.seed)
    if args.sampled_eval:
        torch.manual_seed(args.seed)

        def sampled(obs: np.ndarray) -> int:
            action, _ = model.predict(obs, deterministic=False)
            return int(action)

        sampled_result = evaluate(
            args.game, sampled, args.eval_episodes, args.eval_max_steps, args.seed
        )
        result["sampled_return"] = sampled_result["mean_return"]
    return {
        "name": f"SB3 PPO ({vec_cls.__name__})",
        "steps": steps,
        "wall_s": wall,
        "steps_per_s": steps / wall,
        "cpu_ms_per_step": 1000 * cpu / max(1, steps),
        **result,
    }


# -- report ------------------------------------------------------------------------------------


def report(ours: dict[str, Any], sb3: dict[str, Any] | None) -> None:
    rows = [
        ("env steps", "steps", "{:,.0f}"),
        ("wall time (s)", "wall_s", "{:.1f}"),
        ("env steps/s", "steps_per_s", "{:,.0f}"),
        ("CPU ms per step", "cpu_ms_per_step", "{:.3f}"),
        ("final mean return", "mean_return", "{:.2f}"),
        ("final mean score", "mean_score", "{:.2f}"),
    ]
    if "sampled_return" in ours:
        rows.append(("sampled mean return", "sampled_return", "{:.2f}"))
    columns = [ours] + ([sb3] if sb3 else [])
    width = max(len(c["name"]) for c in columns) + 2
    print()
    print(
        f"{'':<20}"
        + "".join(f"{c['name']:>{width}}" for c in columns)
        + ("   ratio" if sb3 else "")
    )
    for label, key, fmt in rows:
        line = f"{label:<20}" + "".join(f"{fmt.format(c[key]):>{width}}" for c in columns)
        if sb3 and key in (
            "steps_per_s", "mean_return", "mean_score", "wall_s", "sampled_return",
            "cpu_ms_per_step",
        ):  # fmt: skip
            line += f"   {_ratio(ours[key], sb3[key])}"
        print(line)
    if sb3:
        speedup = ours["steps_per_s"] / sb3["steps_per_s"]
        verdict = (
            "meets" if speedup >= 2 and ours["mean_return"] >= sb3["mean_return"] else "misses"
        )
        print(
            f"\nthroughput {speedup:.2f}x SB3's; final return {ours['mean_return']:.2f} vs "
            f"{sb3['mean_return']:.2f} -> {verdict} the target (>= 2x and an equal or better score)"
        )
        print(bound_report(ours, sb3))


def _ratio(a: float, b: float) -> str:
    if b == 0 or (a < 0) != (b < 0):
        return "n/a"
    return f"{a / b:.2f}x"


def _mean(runs: list[dict[str, Any]]) -> dict[str, Any]:
    mean: dict[str, Any] = {"name": runs[0]["name"]}
    keys = ("steps", "wall_s", "steps_per_s", "cpu_ms_per_step", "mean_return", "mean_score")
    for key in (*keys, "sampled_return"):
        if key in runs[0]:
            mean[key] = float(np.mean([r[key] for r in runs]))
    return mean


def per_seed_table(seeds: list[int], ours: list[dict[str, Any]], sb3: list[dict[str, Any]]) -> None:
    """One row per seed: throughput of both, their ratio, greedy returns of both."""
    print("\nper seed:")
    print(
        f"{'seed':>4} {'ours steps/s':>13} {'SB3 steps/s':>12} {'ratio':>6}  "
        "greedy return ours / SB3"
    )
    for seed, a, b in zip(seeds, ours, sb3, strict=True):
        print(
            f"{seed:>4} {a['steps_per_s']:>13,.0f} {b['steps_per_s']:>12,.0f} "
            f"{a['steps_per_s'] / b['steps_per_s']:>5.2f}x  {a['mean_return']:.2f} / "
            f"{b['mean_return']:.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    n_cores = cores()
    try:
        import stable_baselines3
    except ImportError:
        stable_baselines3 = None
        print("stable-baselines3 is not installed (pip install stable-baselines3): skipping SB3")
    print(
        f"game {args.game}, {args.steps:,} env steps, {args.envs} envs, seeds "
        f"{args.seed}..{args.seed + args.seeds - 1}, {n_cores} cores, torch {torch.__version__}"
        + (f", stable-baselines3 {stable_baselines3.__version__}" if stable_baselines3 else "")
    )
    print(shared_settings(args))
    print(
        "value loss: both the squared error of the clipped prediction (SB3's form; ours with "
        "value_loss_form 'clipped')"
        + ("; ours overlaps collection and training" if args.overlap else "")
    )
    if hasattr(os, "getloadavg"):
        print(f"load average before the run: {os.getloadavg()[0]:.2f} ({n_cores} cores)")
    ours_runs: list[dict[str, Any]] = []
    sb3_runs: list[dict[str, Any]] = []
    first_seed = args.seed
    for seed in range(first_seed, first_seed + args.seeds):
        args.seed = seed
        ours = run_isolated(run_ours, args)
        ours_runs.append(ours)
        line = f"seed {seed}: ours {ours['steps_per_s']:,.0f} steps/s"
        line += f", return {ours['mean_return']:.2f}"
        if "sampled_return" in ours:
            line += f" (sampled {ours['sampled_return']:.2f})"
        if stable_baselines3 is not None:
            sb3 = run_isolated(run_sb3, args)
            sb3_runs.append(sb3)
            line += f"; SB3 {sb3['steps_per_s']:,.0f} steps/s, return {sb3['mean_return']:.2f}"
            if "sampled_return" in sb3:
                line += f" (sampled {sb3['sampled_return']:.2f})"
        print(line, flush=True)
    if args.seeds > 1:
        if sb3_runs:
            per_seed_table(list(range(first_seed, first_seed + args.seeds)), ours_runs, sb3_runs)
        print(f"\nmeans over {args.seeds} seeds:")
    report(_mean(ours_runs), _mean(sb3_runs) if sb3_runs else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
