"""Stable-Baselines3 with RL Zoo's Atari settings on a bundled game, for a wall-clock budget:
the peer column of `generality.py` (`--algos sb3_dqn sb3_ppo`).

    python benchmarks/sb3_zoo.py --algo ppo --game key_hunt --minutes 30 [--seed 0]

What a user of SB3 would run on one of our games: the game's Gymnasium id
(`oakemu_rl.envs:oakemu/<game>`) seen as Atari agents see Atari (the play area resized to
84x84 grayscale, 4 frames stacked; while training, rewards clipped to their sign and a lost
life the end of an episode, as the Zoo's `AtariWrapper` does), SB3's `CnnPolicy` (the Nature
CNN) and the
hyperparameters of RL Zoo's `atari` entries (rl-baselines3-zoo, hyperparams/ppo.yml and
dqn.yml), stopped when the time is up. The model is saved in the run directory with a
`summary.json`; `evaluate` plays it greedily from fresh starts (env seeds seed, seed + 1,
...) and summarises the episodes as `oakemu-rl evaluate --json` does. A run directory that
already holds a summary is reused. Needs SB3: `pip install -e '.[bench]'`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from oakemu_rl.envs import EpisodicLife, OakEmuEnv, ObservationConfig
from oakemu_rl.envs.lives import lives_lost
from oakemu_rl.games.loader import bundled_games
from oakemu_rl.runtime.tester import summarise
from training_runs import Evaluation

OBSERVATION = {"type": "screen", "height": 84, "width": 84, "grayscale": True, "frame_stack": 4}
"""The Atari preprocessing the Zoo's settings assume (AtariWrapper, VecFrameStack 4)."""

ZOO_PPO: dict[str, Any] = {
    "n_envs": 8,
    "n_steps": 128,
    "n_epochs": 4,
    "batch_size": 256,
    "learning_rate": 2.5e-4,  # linear schedule to 0 over the run
    "clip_range": 0.1,  # linear schedule to 0 over the run
    "vf_coef": 0.5,
    "ent_coef": 0.01,
}
ZOO_DQN: dict[str, Any] = {
    "buffer_size": 100_000,
    "learning_rate": 1e-4,
    "batch_size": 32,
    "learning_starts": 100_000,
    "target_update_interval": 1000,
    "train_freq": 4,
    "gradient_steps": 1,
    "exploration_fraction": 0.1,
    "exploration_final_eps": 0.01,
}


def run_directory(out: Path, algo: str, game: str, seed: int, minutes: float) -> Path:
    """Where `train` keeps the run of SB3's `algo` on `game`."""
    return out / "runs" / f"sb3_{algo}-{game}-s{seed}-{minutes:g}min"


def train_side_by_side(out: Path, game: str, seed: int, minutes: float, episodes: int) -> None:
    """Train SB3's DQN and PPO on `game` at the same time, in two processes, and evaluate
    each as `main` does (`episodes` greedy games). Each runs on one thread (as RL Zoo
    does), so on a machine with two cores or more each gets a core of its own, in half the
    wall clock of two runs in turn (they still share the caches and memory: measured, 9-15%
    fewer steps each). Runs already trained are not started again."""
    pending = [
        algo
        for algo in ("dqn", "ppo")
        if not (run_directory(out, algo, game, seed, minutes) / "summary.json").is_file()
    ]
    # One BLAS thread each as well: two processes share the two cores.
    one_thread = dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
    processes = []
    for algo in pending:
        command = [sys.executable, __file__, "--algo", algo, "--game", game, "--seed", str(seed)]
        command += ["--minutes", f"{minutes:g}", "--episodes", str(episodes), "--out", str(out)]
        env = {**os.environ, **one_thread}
        processes.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL))
    failed = [algo for algo, process in zip(pending, processes, strict=True) if process.wait()]
    if failed:
        raise RuntimeError(f"SB3 {' and '.join(failed)} on {game}, seed {seed}, failed")


def train(
    out: Path, algo: str, game: str, seed: int, minutes: float
) -> tuple[Path, dict[str, Any]]:
    """Train SB3's `algo` ('dqn' or 'ppo') on `game` for `minutes`; the run directory and
    its summary (as `training_runs.train` gives them)."""
    run_dir = run_directory(out, algo, game, seed, minutes)
    if (run_dir / "summary.json").is_file():
        return run_dir, json.loads((run_dir / "summary.json").read_text())
    import torch
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.atari_wrappers import ClipRewardEnv
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    import oakemu_rl.envs  # noqa: F401  (registers the oakemu/<game> Gymnasium ids)

    class TimeLimit(BaseCallback):
        """Stops training once the wall-clock budget is spent."""

        def __init__(self, seconds: float) -> None:
            super().__init__()
            self.deadline = time.monotonic() + seconds

        def _on_step(self) -> bool:
            return time.monotonic() < self.deadline

    torch.set_num_threads(1)
    env_id = f"oakemu_rl.envs:oakemu/{game}"
    vec_env: dict[str, Any] = {
        "seed": seed,
        "env_kwargs": {"observation_config": OBSERVATION},
        "wrapper_class": lambda env: ClipRewardEnv(EpisodicLife(env)),  # as AtariWrapper
    }
    # A step budget far beyond what the time allows: the schedules assume this many steps,
    # so PPO's learning rate and clip range fall only a little, as they would early in the
    # Zoo's 10M-step runs.
    budget = 10_000_000
    model: Any
    if algo == "ppo":
        settings = dict(ZOO_PPO)
        env = make_vec_env(env_id, n_envs=settings.pop("n_envs"), **vec_env)
        lr, clip = settings.pop("learning_rate"), settings.pop("clip_range")
        model = PPO(
            "CnnPolicy",
            env,
            learning_rate=lambda remaining: lr * remaining,
            clip_range=lambda remaining: clip * remaining,
            seed=seed,
            device="cpu",
            verbose=0,
            **settings,
        )
    else:
        env = make_vec_env(env_id, n_envs=1, **vec_env)
        model = DQN(
            "CnnPolicy",
            env,
            optimize_memory_usage=False,
            seed=seed,
            device="cpu",
            verbose=0,
            **ZOO_DQN,
        )
    started = time.monotonic()
    model.learn(total_timesteps=budget, callback=TimeLimit(minutes * 60))
    seconds = time.monotonic() - started
    env.close()
    run_dir.mkdir(parents=True, exist_ok=True)
    model.save(run_dir / "model.zip")
    summary = {"algo": f"sb3_{algo}", "steps": int(model.num_timesteps), "seconds": seconds}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"  trained SB3 {algo.upper()} on {game}, seed {seed}: {model.num_timesteps:,} "
          f"steps in {seconds:.0f} s", flush=True)  # fmt: skip
    return run_dir, summary


def evaluate(run_dir: Path, game: str, episodes: int, seed: int) -> Evaluation:
    """The saved model, greedy, for `episodes` games from fresh starts."""
    cache = run_dir / f"eval-greedy-{episodes}-s{seed}.json"
    if not cache.is_file():
        from stable_baselines3 import DQN, PPO

        algo = json.loads((run_dir / "summary.json").read_text())["algo"]
        model = (PPO if algo == "sb3_ppo" else DQN).load(run_dir / "model.zip", device="cpu")
        env = OakEmuEnv(game, ObservationConfig(**OBSERVATION))
        records = []
        for episode in range(episodes):
            observation, info = env.reset(seed=seed + episode)
            total, length, lost = 0.0, 0, 0
            while True:
                action, _ = model.predict(observation, deterministic=True)
                lives = info.get("lives")
                observation, reward, terminated, truncated, info = env.step(int(action))
                lost += lives_lost(lives, info.get("lives"))
                total += float(reward)
                length += 1
                if terminated or truncated:
                    break
            score = float(info.get("score") or 0.0)
            records.append((total, score, length, info.get("outcome"), lost))
        env.close()
        cache.write_text(json.dumps(summarise(records, step=0, policy="greedy").to_dict()))
    return Evaluation.from_json(json.loads(cache.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algo", choices=("dqn", "ppo"), required=True)
    parser.add_argument("--game", choices=sorted(bundled_games()), required=True)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("benchmark-runs/sb3_zoo"))
    args = parser.parse_args()
    run_dir, _ = train(args.out, args.algo, args.game, args.seed, args.minutes)
    result = evaluate(run_dir, args.game, args.episodes, seed=1000 + args.seed)
    print(f"SB3 {args.algo.upper()} on {args.game}: mean return {result.interval()}, mean "
          f"score {result.mean_score:.1f}, win rate {result.win_rate:.0%}")  # fmt: skip


if __name__ == "__main__":
    main()
