"""Mastering forest_run: DQN, restarts, search demonstrations and PPO, same wall clock each.

    python benchmarks/forest_run.py [--minutes 20] [--seeds 0] [--demos 8]
                                    [--only dqn dqn+restarts ...] [--out DIR]

First it makes search demonstrations (`oakemu-rl demo forest_run`), timed on their own.
Then, for each variant and seed, it trains as a user would (a run directory with a
summary already in the output directory is reused, so an interrupted benchmark resumes),

    oakemu-rl train --game forest_run --config VARIANT.yaml [--demos DIR] --seed S

with `max_time_s` set to the same wall-clock budget for every variant. The run keeps its
last 3 checkpoints and its 4 best by evaluation; each of them plays the same 20 greedy
games (`oakemu-rl evaluate RUN --all`), since a run's evaluations of 10 games are too few
to pick the best by, and the one that won most then plays 50 other games from fresh
starts, with no search at play time. It reports, per variant, the win rate, the rate of wins with no
life lost, the mean sector reached and the time to the first win from the game's start
during training; and it draws the win rate of the runs' evaluations against env steps
and against wall time (`forest_run.png` in the output directory).

Variants:
    dqn                   the forest_run preset (DQN on attribute observations)
    dqn+restarts          ... with a restart pool drawn by failure, progress by sector
    dqn+restarts+demos    ... and the search demonstrations (DQfD, backplay, restarts)
    ppo+restarts+demos    PPO with the same restarts and demonstrations (BC, backplay)
    distill               the search teacher distilled into the network (DAgger: the
                          teacher labels every state the envs reach, it acts with a
                          probability beta that decays, the student learns the soft
                          targets by cross-entropy)
    distill+intervene     distill where the teacher also overrides the student's moves
                          that lose a life (`distill.intervene`), so its episodes reach the
                          later sectors it would not reach alone
    distill+safety        distill with the cheaper teacher (`distill.search: safety`): only
                          which actions survive, depth first; several times the labels
    distill+safety+intervene  both: the cheap teacher's labels, and its overrides carry
                          the student's episodes into the sectors it cannot yet reach
    distill+safety+intervene+reset  ... with the student reset every 2,000 updates
                          (`distill.shrink_perturb`), since one trained on the growing
                          dataset loses the plasticity to fit it
    distill+safety+intervene+refit  ... with a fresh student refitted on the side after
                          every 2,000 updates (`distill.refit_every_updates`), swapped in
                          once it does as well on held-out states, so the acting student
                          never plays worse for it
    distill+safety+intervene+refit+hidden  ... with the teacher told which of the game's
                          frame counters the screen does not show (`distill.hidden`:
                          on which frame of a step the forest scrolls and the player
                          steers), so it teaches only the moves safe whatever they hold
    distill+safety+intervene+refit+3frames  ... with three stacked frames instead of two:
                          in sectors 4-6 the last two steps' scrolls (2 then 1, or 1
                          then 1) show whether the next scrolls 1 row or 2
    distill+safety+intervene+refit+late  ... with half the episodes restarted from
                          states saved along earlier ones, the later sectors drawn most
                          (a restart pool by progress), so the fast last sectors, short
                          in steps, are not thin in the dataset
    distill+safety+intervene+refit+late+situation-h16  ... with a teacher whose searches
                          remember failures by the YAML's situation (`distill.prune:
                          situation`: a move that differs from one searched only by a shot
                          is not searched again), so that it can look 16 steps ahead
                          instead of 12 for fewer emulator steps a label and see the traps
                          that close beyond 12
    distill+safety+intervene+refit+late+situation-h16+safe-set  ... with the student
                          trained to put its mass on the safe moves (`distill.loss:
                          safe_set`) rather than to split it as the teacher's even target
                          does, so that one safe move can be clearly the most likely
    distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn  ... with a student
                          whose first convolution keeps every attribute cell (`model.torso:
                          cell_cnn`), so a tree one cell from the car is not blurred into
                          the car's own cell
    distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+ema  ... with the
                          student that acts a moving average of the trained weights
                          (`distill.ema_decay: 0.999`), which swing from one update to the
                          next on the growing dataset
    distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+hidden  ... with
                          the teacher told the frame counters the screen does not show
                          (`distill.hidden`, as above): most of that variant's remaining
                          unsafe moves in its own games were safe with other counter values
    distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+3frames  ... with
                          three stacked frames instead of two (as above): the scroll phase
                          of sectors 4-6 shown, at no labelling cost
    distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+counters  ... with
                          the frame counters the screen does not show given to the student
                          (`observation.variable_planes`: one plane per bit of
                          scroll_timer and steer_timer), so that it need not guess them
    distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+ensemble  ... with
                          an acting student of three networks trained apart
                          (`distill.members: 3`), whose mean policy errs less often than
                          any one of them, at three times the learner's compute
    distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+counters+ensemble
                          ... the counters shown and the three-network student together
    distill+margin+intervene  ... with the teacher that weights each safe move by the room
                          it leaves (`distill.search: margin`), so the student learns to
                          keep away from the spots where one wrong move loses a life
    distill+ppo           distill+safety+intervene+refit for half the budget, then PPO
                          from the distilled student (`train --init-from`) for the other
                          half: its value head trained alone for the first 50,000 steps
                          (`init_anchor.value_warmup_steps`), the anchor to the student
                          falling over the next 500,000
    distill+ppo+episodic  ... with a lost life as the end of bootstrapping (`episodic_life`),
                          so PPO no longer trades lives for sectors (in the same --out
                          directory it starts from the same distilled student)
    distill+counters+ppo+episodic  the counters variant for half the budget, then PPO
                          with episodic life from its student, on the same observation,
                          torso and late-sector restarts (2 epochs a rollout, the next
                          collected while the learner trains): reinforcement learning against
                          the lost lives that imitation leaves (about 0.7% of critical
                          states)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

OAKEMU_RL = [sys.executable, "-m", "oakemu_rl.cli.main"]
EPISODES = 50
SELECTION_EPISODES, SELECTION_SEED = 20, 7

RESTARTS: dict[str, Any] = {
    "restart_pool": {
        "enabled": True,
        "priority": "failure",
        "progress_variable": "sector",
        "save_every_steps": 50,
        "restart_probability": 0.5,
    }
}
OBSERVATION = {"env": {"observation": {"type": "attributes", "frame_stack": 2}}}
# forest_run's frame counters, which the screen does not show: frames to the next row
# scrolled (1 to the sector's scroll_period) and to the next column steered (1 or 2).
HIDDEN: dict[str, list[int | str]] = {"scroll_timer": [1, "scroll_period"], "steer_timer": [1, 2]}
DISTILL: dict[str, Any] = {
    # Labels are the bottleneck, so the workers that make them run at normal priority
    # rather than the default SCHED_IDLE, which leaves them only what the learner spares.
    "env": {
        "num_envs": 4,
        "worker_nice": 0,
        "observation": {"type": "attributes", "frame_stack": 2},
    },
    # The teacher that won a game with no life lost (horizon 12, width 8, its unsafe
    # verdicts checked depth-first). Two updates per label overfit: offline, on the second
    # run's 20,000 labels, the student picks a safe action on 95-98% of held-out critical
    # states after 1,000 updates of 128 and 92% after 6,000; the run's own student, after
    # 40,000, on 78%. An attribute observation (18 planes of 0/255, 2 frames) is stored
    # bit-packed in 3.3 KB: 1 GiB keeps 320,000 labels, every label of two hours even with
    # the safety teacher's 17 a second. (Unpacked, 26 KB each, it filled after 40,000, and
    # evicting the later sectors' labels undid the student: long-games.md, fourth run.)
    "distill": {
        "horizon": 12,
        "width": 8,
        "beta_decay_steps": 8_000,
        "updates_per_step": 0.1,
        "batch_size": 128,
        "dataset_bytes": 2**30,
    },
    # A labelled step is slow (about 5 a second on 2 cores): evaluate by steps accordingly.
    "tester": {"every_steps": 2_000, "episodes": 10},
}
# The safety teacher, its interventions and a student refitted on the side: the base of the
# refit variants.
REFIT = DISTILL["distill"] | {"search": "safety", "intervene": True, "refit_every_updates": 2_000}
# Half the episodes restart from a state saved along an earlier one, drawn by rank of its
# sector (the pool keeps the latest sectors): the fast last sectors, where the refit
# variant's students still err (long-games.md, ninth run), are short in steps and so
# thin in a dataset of whole games.
LATE_RESTARTS: dict[str, Any] = {
    "restart_pool": {
        "enabled": True,
        "priority": "progress",
        "progress_variable": "sector",
        "capacity": 1024,
        "save_every_steps": 25,
        "restart_probability": 0.5,
    }
}
# Fine-tuning, not learning from scratch: a smaller step and entropy bonus than PPO's
# defaults, the critic trained first (the student's value head never learned) and the
# anchor to the student falling over about a third of the hour's PPO steps.
DISTILL_PPO: dict[str, Any] = {
    "env": DISTILL["env"],
    "ppo": {"learning_rate": 2.5e-4, "ent_coef": 0.001},
    "init_anchor": {"coef": 1.0, "value_warmup_steps": 50_000, "decay_steps": 500_000},
}
# The best distill variant so far (86% won, 28% with no life lost on seed 0): the later
# variants each add one thing to it.
BEST_DISTILL: dict[str, Any] = (
    DISTILL
    | {"distill": REFIT | {"prune": "situation", "horizon": 16, "loss": "safe_set"}}
    | {"model": {"torso": "cell_cnn"}}
    | LATE_RESTARTS
)
# The frame counters the screen does not show, given to the student as planes (best on seed
# 0: 90% won, 38% with no life lost). 16 planes more a frame: a label takes 6.5 KB
# bit-packed, so the dataset's bound is raised by half to keep the 180,000 labels of the
# fastest run without evicting any.
COUNTERS: dict[str, Any] = BEST_DISTILL | {
    "env": BEST_DISTILL["env"]
    | {"observation": BEST_DISTILL["env"]["observation"] | {"variable_planes": list(HIDDEN)}},
    "distill": BEST_DISTILL["distill"] | {"dataset_bytes": 3 * 2**29},
}
VARIANTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "dqn": ("dqn", {}, False),
    "dqn+restarts": ("dqn", RESTARTS, False),
    "dqn+restarts+demos": ("dqn", RESTARTS, True),
    "ppo+restarts+demos": ("ppo", RESTARTS | OBSERVATION, True),
    "distill": ("distill", DISTILL, False),
    "distill+intervene": (
        "distill",
        DISTILL | {"distill": DISTILL["distill"] | {"intervene": True}},
        False,
    ),
    "distill+safety": (
        "distill",
        DISTILL | {"distill": DISTILL["distill"] | {"search": "safety"}},
        False,
    ),
    "distill+safety+intervene": (
        "distill",
        DISTILL | {"distill": DISTILL["distill"] | {"search": "safety", "intervene": True}},
        False,
    ),
    "distill+safety+intervene+reset": (
        "distill",
        DISTILL
        | {
            "distill": DISTILL["distill"]
            | {
                "search": "safety",
                "intervene": True,
                "shrink_perturb": {"every_updates": 2_000, "shrink": 0.0},
            }
        },
        False,
    ),
    "distill+safety+intervene+refit": ("distill", DISTILL | {"distill": REFIT}, False),
    "distill+safety+intervene+refit+hidden": (
        "distill",
        DISTILL | {"distill": REFIT | {"hidden": HIDDEN}},
        False,
    ),
    "distill+safety+intervene+refit+3frames": (
        "distill",
        DISTILL
        | {
            "env": DISTILL["env"]
            | {"observation": DISTILL["env"]["observation"] | {"frame_stack": 3}},
            "distill": REFIT,
        },
        False,
    ),
    "distill+safety+intervene+refit+late": (
        "distill",
        DISTILL | {"distill": REFIT} | LATE_RESTARTS,
        False,
    ),
    "distill+safety+intervene+refit+late+situation-h16": (
        "distill",
        DISTILL | {"distill": REFIT | {"prune": "situation", "horizon": 16}} | LATE_RESTARTS,
        False,
    ),
    "distill+safety+intervene+refit+late+situation-h16+safe-set": (
        "distill",
        DISTILL
        | {"distill": REFIT | {"prune": "situation", "horizon": 16, "loss": "safe_set"}}
        | LATE_RESTARTS,
        False,
    ),
    "distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn": (
        "distill",
        BEST_DISTILL,
        False,
    ),
    "distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+ema": (
        "distill",
        BEST_DISTILL | {"distill": BEST_DISTILL["distill"] | {"ema_decay": 0.999}},
        False,
    ),
    "distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+hidden": (
        "distill",
        BEST_DISTILL | {"distill": BEST_DISTILL["distill"] | {"hidden": HIDDEN}},
        False,
    ),
    "distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+3frames": (
        "distill",
        BEST_DISTILL
        | {
            "env": BEST_DISTILL["env"]
            | {"observation": BEST_DISTILL["env"]["observation"] | {"frame_stack": 3}}
        },
        False,
    ),
    "distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+counters": (
        "distill",
        COUNTERS,
        False,
    ),
    "distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+counters+ensemble": (
        "distill",
        COUNTERS | {"distill": COUNTERS["distill"] | {"members": 3}},
        False,
    ),
    "distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+ensemble": (
        "distill",
        BEST_DISTILL | {"distill": BEST_DISTILL["distill"] | {"members": 3}},
        False,
    ),
    "distill+margin+intervene": (
        "distill",
        DISTILL | {"distill": DISTILL["distill"] | {"search": "margin", "intervene": True}},
        False,
    ),
    "distill+ppo": ("ppo", DISTILL_PPO, False),
    # PPO from the student learned to ride on through crashes (a sector pays 22, a life
    # costs 10): with a lost life as the end of bootstrapping, losing one forfeits every
    # later reward.
    "distill+ppo+episodic": ("ppo", DISTILL_PPO | {"episodic_life": True}, False),
    # The cell_cnn's update costs about 4x the small_cnn's: with PPO's 8 epochs the envs
    # waited on the learner 82% of the time (84 steps/s); 2 epochs, collecting the next
    # rollout while the learner trains, make 335.
    "distill+counters+ppo+episodic": (
        "ppo",
        DISTILL_PPO
        | {
            "env": COUNTERS["env"],
            "model": COUNTERS["model"],
            "ppo": DISTILL_PPO["ppo"] | {"epochs": 2, "overlap_collection": True},
            "episodic_life": True,
        }
        | LATE_RESTARTS,
        False,
    ),
}
INIT_FROM = {
    "distill+ppo": "distill+safety+intervene+refit",
    "distill+ppo+episodic": "distill+safety+intervene+refit",
    "distill+counters+ppo+episodic": (
        "distill+safety+intervene+refit+late+situation-h16+safe-set+cell-cnn+counters"
    ),
}
"""Variants that start from another variant's run (trained for half the budget first)."""


def run_command(command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run an `oakemu-rl` command; where it fails, exit with its command line, exit status
    and the end of what it wrote to stderr (a signal's death shows as a negative status)."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} failed with exit status {result.returncode}:\n"
            + result.stderr[-4000:]
        )
    return result


def make_demos(out: Path, episodes: int) -> dict[str, Any]:
    started = time.monotonic()
    command = [*OAKEMU_RL, "demo", "forest_run", "--episodes", str(episodes)]
    result = run_command([*command, "--out", str(out), "--seed", "12345", "--json"])
    summary: dict[str, Any] = json.loads(result.stdout)
    summary["seconds"] = time.monotonic() - started
    return summary


def train(
    name: str, seed: int, minutes: float, demos: Path, root: Path
) -> tuple[Path, dict[str, Any]]:
    algo, settings, with_demos = VARIANTS[name.removesuffix("-half")]
    run_dir = root / f"{name.replace('+', '_')}-seed{seed}"
    if (run_dir / "summary.json").is_file():  # trained by an earlier, interrupted call
        return run_dir, json.loads((run_dir / "summary.json").read_text())
    init_from: Path | None = None
    if name in INIT_FROM:
        minutes /= 2
        init_from, _ = train(INIT_FROM[name] + "-half", seed, minutes, demos, root)
    print(f"{name} seed {seed}: training for {minutes:g} min", flush=True)
    config = {
        "algo": algo,
        "game": "forest_run",
        "total_steps": 10_000_000,
        "max_time_s": minutes * 60,
        "tester": {"every_steps": 25_000, "episodes": 10},
        "checkpoint": {"keep_best": 4},
    } | dict(settings)
    config_path = root / f"{run_dir.name}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    command = [*OAKEMU_RL, "train", "--config", str(config_path), "--seed", str(seed)]
    command += ["--run-dir", str(run_dir), "--quiet"]
    if with_demos:
        command += ["--demos", str(demos)]
    if init_from is not None:
        command += ["--init-from", str(init_from)]
    run_command(command)
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return run_dir, summary


def choose_checkpoint(run_dir: Path) -> Path:
    """The kept checkpoint that plays best on the same `SELECTION_EPISODES` greedy games."""
    command = [*OAKEMU_RL, "evaluate", str(run_dir), "--all", "--json", "--num-envs", "1"]
    command += ["--episodes", str(SELECTION_EPISODES), "--seed", str(SELECTION_SEED)]
    result = run_command(command)
    return Path(json.loads(result.stdout)["best"])


def play_games(run_dir: Path, episodes: int = EPISODES) -> dict[str, Any]:
    """The run's best checkpoint (`choose_checkpoint`), greedy, for `episodes` games from
    fresh starts other than those it was chosen on."""
    from oakemu_rl.envs.lives import lives_lost
    from oakemu_rl.envs.oakemu_env import OakEmuEnv
    from oakemu_rl.experiments.evaluation import (
        checkpoint_policy,
        find_checkpoint,
        read_checkpoint_config,
    )

    checkpoint = find_checkpoint(choose_checkpoint(run_dir))
    _, config = read_checkpoint_config(checkpoint)
    env = OakEmuEnv(config.game, config.env.observation, seed=99_000)
    policy = checkpoint_policy(checkpoint, config, env)
    wins = clean = 0
    sectors = []
    for _ in range(episodes):
        observation, info = env.reset()
        lives = info["lives"]
        lost = 0
        while True:
            action = policy.act(observation)
            observation, _, terminated, truncated, info = env.step(action)
            lost += lives_lost(lives, info["lives"])
            lives = info["lives"]
            if terminated or truncated:
                break
        won = info["outcome"] == "win"
        wins += won
        clean += won and lost == 0
        sectors.append(min(8, int(info["values"]["sector"])))
    return {
        "checkpoint_step": checkpoint.step,
        "win_rate": wins / episodes,
        "clean_win_rate": clean / episodes,
        "mean_sector": float(np.mean(sectors)),
    }


def plot(out: Path) -> Path:
    """Evaluation win rate and mean score of every run under `out` against env steps and
    wall time (all four variants, whichever call of the benchmark trained them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex="col", sharey="row")
    for index, name in enumerate(VARIANTS):
        runs = sorted(out.glob(f"{name.replace('+', '_')}-seed*/summary.json"))
        for i, path in enumerate(runs):
            evaluations = json.loads(path.read_text()).get("evaluations") or []
            steps = [e["step"] for e in evaluations]
            minutes = [(e.get("elapsed_s") or np.nan) / 60 for e in evaluations]
            for row, key in enumerate(("win_rate", "mean_score")):
                values = [e[key] for e in evaluations]
                label = name if i == 0 and row == 0 else None
                axes[row][0].plot(steps, values, marker="o", color=f"C{index}", label=label)
                axes[row][1].plot(minutes, values, marker="o", color=f"C{index}")
    axes[0][0].set(ylabel="evaluation win rate", title="forest_run: against env steps")
    axes[0][1].set(title="against wall-clock minutes (2 cores)")
    axes[1][0].set(xlabel="env steps", ylabel="evaluation mean score")
    axes[1][1].set(xlabel="minutes")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    target = out / "forest_run.png"
    fig.savefig(target, dpi=90)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="training budget per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--demos", type=int, default=8, help="search demonstrations to make")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), help="variants to run")
    parser.add_argument("--out", type=Path, default=Path("benchmark-forest_run"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    variants = args.only or list(VARIANTS)
    demos = args.out / "demos"
    if any(VARIANTS[v][2] for v in variants):
        made = make_demos(demos, args.demos)
        print(
            f"search demonstrations: won {made['wins']}/{made['episodes']} "
            f"({made['clean_wins']} with no life lost), {made['seconds_per_demo']:.0f} s "
            f"per demonstration, {made['seconds'] / 60:.1f} min in all",
            flush=True,
        )
    # Each call adds its runs to the file's, replacing a variant's row of the same seed, so
    # that seeds run by separate calls (one a session) are summed up together.
    results_file = args.out / "results.json"
    results: dict[str, list[dict[str, Any]]] = (
        json.loads(results_file.read_text()) if results_file.exists() else {}
    )
    for name in variants:
        for seed in args.seeds:
            run_dir, summary = train(name, seed, args.minutes, demos, args.out)
            print(
                f"{name} seed {seed}: trained ({summary['steps']:,} steps); choosing the "
                f"checkpoint on {SELECTION_EPISODES} games, then {EPISODES} fresh ones",
                flush=True,
            )
            games = play_games(run_dir)
            row = {"seed": seed, "run_dir": str(run_dir), "summary": summary, **games}
            rows = [r for r in results.get(name, []) if r["seed"] != seed] + [row]
            results[name] = sorted(rows, key=lambda r: int(r["seed"]))
            results_file.write_text(json.dumps(results, indent=2, default=str))
            first = summary.get("first_win")
            print(
                f"{name:<20} seed {seed}: {summary['steps']:>8,} steps, win rate "
                f"{games['win_rate']:.0%}, no life lost {games['clean_win_rate']:.0%}, mean "
                f"sector {games['mean_sector']:.2f}, first win "
                + (f"{first['seconds'] / 60:.1f} min" if first else "none"),
                flush=True,
            )
    plotted = plot(args.out)
    print(f"\n{'variant':<20} {'win rate':>9} {'no loss':>8} {'sector':>7}  first win")
    for name in variants:
        rows = results[name]
        firsts = [r["summary"].get("first_win") for r in rows]
        first = [f["seconds"] / 60 for f in firsts if f]
        print(
            f"{name:<20} {np.mean([r['win_rate'] for r in rows]):>9.0%} "
            f"{np.mean([r['clean_win_rate'] for r in rows]):>8.0%} "
            f"{np.mean([r['mean_sector'] for r in rows]):>7.2f}  "
            + (f"{np.mean(first):.1f} min ({len(first)}/{len(rows)} runs)" if first else "none")
        )
    print(f"plot: {plotted}")


if __name__ == "__main__":
    main()
