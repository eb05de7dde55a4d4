"""Where does a distilled forest_run student still err, and could it know better? (issue 28)

    python benchmarks/forest_run_errors.py RUN_DIR [--games 2] [--every 2] [--redraws 4]

RUN_DIR is a distill run (`benchmarks/forest_run.py`'s, say). Three checks:

1. Held-out states. The run's newest student chooses an action on each held-out critical
   state of its dataset (a state where some action loses a life and another does not); an
   error is an action the teacher's label calls unsafe. For the errors and for as many
   right choices, the Hamming distance from the state's observation to the nearest
   training observation says whether the errors lie where the dataset is thin.
2. Hidden randomness. The run's best checkpoint plays `--games` greedy games from fresh
   starts. Every `--every` steps the run's teacher labels the state; on a critical state
   it labels it `--redraws` times more with the YAML's randomized variables (`start:
   randomize`, forest_run's tree generator) drawn afresh: the futures the screen cannot
   tell apart. If the safe sets hang on the generator, no student can learn them; if the
   student's unsafe moves are unsafe whatever the generator holds, the danger was there
   to see.
3. Hidden timing. The same critical states are labelled again with forest_run's frame
   counters (`HIDDEN` in forest_run.py: on which frame of a step the forest scrolls and the
   player steers, which the screen does not show) set to every other value: per sector,
   how many of the student's unsafe moves were safe with some other value, so that it
   could not have seen they were not (`forest_run_timing.py` measures how often the
   counters change the safe set).
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import numpy as np
import torch

from forest_run import HIDDEN
from oakemu_rl.distill import DATASET_FILE
from oakemu_rl.envs.lives import lives_lost
from oakemu_rl.envs.oakemu_env import OakEmuEnv
from oakemu_rl.experiments.distill_experiment import DistillExperiment
from oakemu_rl.experiments.evaluation import (
    checkpoint_policy,
    find_checkpoint,
    read_checkpoint_config,
)
from oakemu_rl.games.schema import RandomizeStep
from oakemu_rl.games.session import GameSession
from oakemu_rl.runtime.state_adapter import MODEL_FILE
from oakemu_rl.trajectories.teacher import SearchTeacher


def held_out_errors(run_dir: Path) -> None:
    checkpoint = find_checkpoint(run_dir)
    data = checkpoint.load_numpy(DATASET_FILE)
    _, config = read_checkpoint_config(checkpoint)
    bits, safe = data["observation_bits"], data["targets"] > 0
    env = OakEmuEnv(config.game, config.env.observation)
    shape = tuple(env.observation_space.shape)
    env.close()
    student = DistillExperiment.build_model(config, shape, safe.shape[1])
    student.load_state_dict(checkpoint.load_torch(MODEL_FILE)["learner"])
    student.eval()
    held = np.flatnonzero(data["held_out"])
    train = np.flatnonzero(~data["held_out"])
    critical = held[~safe[held].all(axis=1)]
    count = int(np.prod(shape))

    def observations(rows: np.ndarray) -> torch.Tensor:
        values = np.unpackbits(bits[rows], axis=1, count=count).reshape(len(rows), *shape)
        return torch.from_numpy(values * np.uint8(255))

    with torch.inference_mode():
        chosen = np.concatenate(
            [
                student(observations(critical[i : i + 256])).argmax(1).numpy()
                for i in range(0, len(critical), 256)
            ]
        )
    right = safe[critical, chosen]
    wrong = critical[~right]
    print(
        f"{run_dir.name}, step {checkpoint.step:,}: {len(critical):,} held-out critical states, "
        f"the student's choice unsafe on {len(wrong)} ({len(wrong) / len(critical):.1%})"
    )
    sizes = collections.Counter(safe[wrong].sum(axis=1).tolist())
    print(f"  safe actions on those states: {dict(sorted(sizes.items()))}")
    training_bits = bits[train]

    def nearest(row: int) -> int:
        return int(np.bitwise_count(np.bitwise_xor(training_bits, bits[row])).sum(axis=1).min())

    sample = critical[right][: len(wrong)]
    far_wrong = [nearest(row) for row in wrong]
    far_right = [nearest(row) for row in sample]
    print(
        f"  nearest training observation (bits differing of {count:,}): median "
        f"{np.median(far_wrong):.0f} for the errors, {np.median(far_right):.0f} for as many "
        "right choices"
    )


def redraw(session: GameSession, state: bytes, rng: np.random.Generator) -> bytes:
    """`state` with the game's randomized variables (its start procedure's) drawn afresh."""
    session.reset_to_state(state)
    for step in session.game.spec.start:
        if isinstance(step, RandomizeStep):
            session.randomize(step.randomize, rng)
    return session.save_state()


def hidden_randomness(run_dir: Path, games: int, every: int, redraws: int) -> None:
    checkpoint = find_checkpoint(run_dir, best=True)
    _, config = read_checkpoint_config(checkpoint)
    env = OakEmuEnv(config.game, config.env.observation, seed=99_000)
    policy = checkpoint_policy(checkpoint, config, env)
    teacher = SearchTeacher(env.game, config.distill.teacher_settings())
    with_hidden = config.distill.model_copy(update={"hidden": HIDDEN})
    timing = SearchTeacher(env.game, with_hidden.teacher_settings())
    scratch = GameSession(env.game)
    rng = np.random.default_rng(0)
    counts: collections.Counter[str] = collections.Counter()
    by_sector: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for game in range(games):
        observation, info = env.reset()
        lives, step = info["lives"], 0
        while True:
            action = policy.act(observation)
            if step % every == 0:
                state = env.machine.save_state()
                safe = teacher.label(state).safe
                if not safe.all():
                    counts["critical"] += 1
                    safe_in_redraws = 0
                    for _ in range(redraws):
                        other = teacher.label(redraw(scratch, state, rng)).safe
                        counts["redraws"] += 1
                        counts["same safe set"] += bool((other == safe).all())
                        counts["a safe action made unsafe"] += bool((safe & ~other).any())
                        safe_in_redraws += bool(other[action])
                    if not safe[action]:
                        counts["student unsafe"] += 1
                        counts["... safe in some redraw"] += safe_in_redraws > 0
                    sector = int(info["values"]["sector"])
                    by_sector[sector]["critical"] += 1
                    by_sector[sector]["student unsafe"] += not safe[action]
                    if not safe[action]:
                        variants = [teacher.label(v).safe for v in timing.hidden_variants(state)]
                        by_sector[sector]["student unsafe, safe with other counters"] += any(
                            bool(other[action]) for other in variants
                        )
            observation, _, terminated, truncated, info = env.step(action)
            counts["lives lost"] += lives_lost(lives, info["lives"])
            lives, step = info["lives"], step + 1
            if terminated or truncated:
                break
        print(f"  game {game}: {info['outcome']}, {step} steps, sector {info['values']['sector']}")
    redrawn = max(1, counts["redraws"])
    print(
        f"{games} greedy games of the best checkpoint (step {checkpoint.step:,}), every "
        f"{every} steps labelled: {counts['critical']} critical states, {redraws} redraws "
        f"each; the redrawn safe set equals the real one in "
        f"{counts['same safe set'] / redrawn:.0%}, a redraw makes a really safe action unsafe in "
        f"{counts['a safe action made unsafe'] / redrawn:.1%}. Lives lost: "
        f"{counts['lives lost']}; the student's move unsafe on {counts['student unsafe']} "
        f"labelled states, {counts['... safe in some redraw']} of them safe in some redraw"
    )
    print("per sector (a student's unsafe move may be safe with other hidden counters):")
    for sector, tally in sorted(by_sector.items()):
        print(f"  sector {sector}: " + ", ".join(f"{k} {v}" for k, v in tally.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--every", type=int, default=2, help="label every N-th step")
    parser.add_argument("--redraws", type=int, default=4)
    args = parser.parse_args()
    held_out_errors(args.run_dir)
    hidden_randomness(args.run_dir, args.games, args.every, args.redraws)


if __name__ == "__main__":
    main()
