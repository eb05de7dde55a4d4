"""Faults injected into real training runs: what survives and what is lost.

    python benchmarks/faults.py [--repeats 3] [--json faults.json] [--only full-disk ...]

Each scenario runs `oakemu-rl train` (DQN on gym:CartPole-v1, 4 envs on 2 worker
processes, a checkpoint every 1,000 steps, the replay buffer in the checkpoints) as a
subprocess in a session of its own, injects one fault, and reads what the run left:
its exit code, summary.json, checkpoints and stderr. Runs killed outright are resumed
with `--resume`, and the table says from where.

- worker kill -9: one env worker killed with SIGKILL, `--repeats` times in one run.
- worker SIGSTOP: one env worker stopped (env.worker_timeout_s: 5).
- game fails every reset: a copy of catch whose start procedure waits for a routine
  that never runs; every reset raises, so every restarted worker dies again.
- SIGINT x2, SIGTERM, SIGINT x3: signals to the run's whole process group.
- run kill -9: the whole process group killed at a random moment, then resumed.
- kill -9 during a checkpoint write: killed as soon as a checkpoint's temporary
  directory appears, then resumed.
- full disk: the run directory on a 12 MiB tmpfs (a private mount namespace made with
  `unshare`); skipped where unprivileged user namespaces are not allowed.

"steps lost" is the env steps trained and not in any checkpoint: for a run that stopped
cleanly, its final step minus its newest checkpoint's; for a killed run, an estimate
(time since the newest checkpoint times the run's steps per second).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from oakemu_rl.experiments import EXPERIMENTS
from oakemu_rl.games.loader import bundled_games
from oakemu_rl.runtime.checkpoints import CheckpointManager

OAKEMU_RL = [sys.executable, "-m", "oakemu_rl.cli.main"]
CHECKPOINT_EVERY = 1000


def config(root: Path, **overrides: Any) -> Path:
    """A small DQN CartPole run on two worker processes (as a YAML file)."""
    data: dict[str, Any] = {
        "algo": "dqn",
        "game": "gym:CartPole-v1",
        "total_steps": 10_000_000,
        "torch_threads": 1,
        "env": {"num_envs": 4, "num_workers": 2, "worker_timeout_s": 5.0},
        "tester": {"enabled": False},
        "checkpoint": {"every_steps": CHECKPOINT_EVERY, "save_replay_buffer": True},
        "model": {"mlp_hidden": [64], "head_hidden": 0},
        "learner": {"learning_starts": 500, "batch_size": 32},
        "replay": {"capacity": 100_000},
        "logging": {"console": False, "tensorboard": False},
    }
    for key, value in overrides.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    path = root / f"config-{len(list(root.glob('config-*.yaml')))}.yaml"
    path.write_text(EXPERIMENTS["dqn"].config_type.from_dict(data).to_yaml())
    return path


class Training:
    """`oakemu-rl train` in a session of its own."""

    def __init__(self, run_dir: Path, config_path: Path, *extra: str, wrap: list[str] = ()):
        self.run_dir = run_dir
        command = [*OAKEMU_RL, "train", "--config", str(config_path), "--run-dir", str(run_dir)]
        self.process = subprocess.Popen(
            [*wrap, *command, "--quiet", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.started = time.monotonic()
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("run directory:"):
                break

    def signal(self, sig: int) -> None:
        os.killpg(self.process.pid, sig)

    def wait(self, timeout: float = 300) -> tuple[int, str, str]:
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, out, err

    def workers(self) -> list[int]:
        """The env worker processes: grandchildren through the fork server."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                children.setdefault(int(fields[1]), []).append(int(entry.name))
        return [w for child in children.get(self.process.pid, []) for w in children.get(child, [])]

    def checkpoints(self) -> CheckpointManager:
        return CheckpointManager(self.run_dir / "checkpoints", warn=lambda _: None)

    def summary(self) -> dict[str, Any]:
        path = self.run_dir / "summary.json"
        return json.loads(path.read_text()) if path.exists() else {}


def wait_for(condition: Callable[[], bool], timeout: float = 120, every: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return False


def clean_stop(training: Training, code: int, err: str) -> dict[str, Any]:
    """What a run that stopped by itself left."""
    summary = training.summary()
    latest = training.checkpoints().latest()
    lost = summary.get("steps", 0) - (latest.step if latest else 0) if summary else None
    return {
        "exit": code,
        "summary": bool(summary),
        "final checkpoint": bool(latest) and latest.step == summary.get("steps"),
        "steps lost": lost,
        "stop reason": summary.get("stop_reason"),
        "stderr lines": len(err.splitlines()),
    }


def resume(training: Training, steps_at_kill: float | None) -> dict[str, Any]:
    """Resume a killed run for 1,000 more steps than its newest complete checkpoint."""
    latest = training.checkpoints().latest()
    assert latest is not None, "no checkpoint to resume from"
    result = subprocess.run(
        [*OAKEMU_RL, "train", "--resume", str(training.run_dir), "--quiet",
         "--steps", str(latest.step + 1000)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    summary = training.summary()
    partial = [
        line for line in result.stdout.splitlines() if "checkpoints:" in line or "skipping" in line
    ]
    return {
        "exit": result.returncode,
        "resumed from": summary.get("resumed_from_step"),
        "newest complete checkpoint": latest.step,
        "resume exact": summary.get("resumed_from_step") == latest.step
        and summary.get("steps") == latest.step + 1000,
        "steps lost": None if steps_at_kill is None else max(0, round(steps_at_kill - latest.step)),
        "messages": partial,
    }


def steps_estimate(training: Training, killed_at: float) -> float | None:
    """Env steps at the kill (`killed_at`, wall-clock time): the newest checkpoint's step
    plus the steps since it was written, at the rate between the first and the newest."""
    checkpoints = training.checkpoints().list()
    if len(checkpoints) < 2:
        return None
    first, last = checkpoints[0], checkpoints[-1]
    rate = (last.step - first.step) / max(last.elapsed_time - first.elapsed_time, 1e-9)
    since = killed_at - (last.path / "manifest.json").stat().st_mtime
    return last.step + max(0.0, since) * rate


# -- scenarios ---------------------------------------------------------------------------


def worker_kills(root: Path, repeats: int) -> dict[str, Any]:
    training = Training(root / "kill-worker", config(root, total_steps=12_000))
    killed = 0
    for n in range(repeats):
        wait_for(lambda n=n: training.checkpoints().list() and len(training.workers()) == 2)
        time.sleep(0.5)
        workers = training.workers()
        if workers:
            os.kill(random.choice(workers), signal.SIGKILL)
            killed += 1
    code, _, err = training.wait()
    summary = training.summary()
    return {
        "fault": "worker kill -9",
        "injected": killed,
        **clean_stop(training, code, err),
        "worker restarts": summary.get("worker_restarts"),
        "truncated episodes": summary.get("truncated"),
    }


def worker_stop(root: Path) -> dict[str, Any]:
    training = Training(root / "stop-worker", config(root, total_steps=12_000))
    wait_for(lambda: len(training.workers()) == 2)
    time.sleep(1.0)
    os.kill(training.workers()[0], signal.SIGSTOP)
    code, _, err = training.wait()
    summary = training.summary()
    return {
        "fault": "worker SIGSTOP",
        "injected": 1,
        **clean_stop(training, code, err),
        "worker restarts": summary.get("worker_restarts"),
    }


def failing_game(root: Path) -> dict[str, Any]:
    catch = bundled_games()["catch"]
    spec = yaml.safe_load(catch.read_text())
    spec["routines"]["never"] = 0x0000  # the ROM's reset entry: never runs in a game
    spec["start"] = [{"wait": 2}, {"run_until": "never", "timeout_frames": 5}]
    game_dir = root / "broken-game"
    game_dir.mkdir()
    shutil.copy(catch.parent / "catch.sna", game_dir / "catch.sna")
    (game_dir / "broken.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    path = config(root, game=str(game_dir / "broken.yaml"), env={"worker_timeout_s": 60})
    started = time.monotonic()
    training = Training(root / "failing-game", path)
    code, _, err = training.wait()
    summary = training.summary()
    return {
        "fault": "game fails every reset",
        "injected": 1,
        **clean_stop(training, code, err),
        "worker restarts": summary.get("worker_restarts"),
        "seconds to stop": round(time.monotonic() - started, 1),
        "tracebacks logged": err.count("Traceback"),
    }


def interrupts(root: Path, name: str, signals: list[int]) -> dict[str, Any]:
    training = Training(root / name.replace(" ", "-"), config(root))
    wait_for(lambda: len(training.checkpoints().list()) >= 2)
    for sig in signals:
        training.signal(sig)
        time.sleep(0.005)
    killed_at = time.time()
    code, _, err = training.wait()
    row = {"fault": name, "injected": 1, **clean_stop(training, code, err)}
    if not row["summary"]:  # aborted: what a resume finds
        row |= {"resume": resume(training, steps_estimate(training, killed_at))}
        row["steps lost"] = row["resume"]["steps lost"]
    return row


def kill_and_resume(root: Path, name: str, moment: Callable[[Training], object]) -> dict[str, Any]:
    """Kill a run (the whole process group, SIGKILL) once it has two checkpoints and
    `moment(training)` has returned, then resume it."""
    training = Training(root / name, config(root))
    wait_for(lambda: len(training.checkpoints().list()) >= 2)
    moment(training)
    killed_at = time.time()
    training.signal(signal.SIGKILL)
    training.wait()
    partial = any((training.run_dir / "checkpoints").glob(".tmp-*"))
    row = resume(training, steps_estimate(training, killed_at))
    row["partial left"] = partial
    return row


def run_kills(root: Path, repeats: int) -> dict[str, Any]:
    rows = [
        kill_and_resume(root, f"kill-run-{n}", lambda _: time.sleep(random.uniform(0.0, 3.0)))
        for n in range(repeats)
    ]
    return summarise_resumes("run kill -9", rows)


def checkpoint_kills(root: Path, repeats: int) -> dict[str, Any]:
    def writing(training: Training) -> bool:
        checkpoints = training.run_dir / "checkpoints"
        return wait_for(lambda: any(checkpoints.glob(".tmp-*")), every=0.0005)

    rows = [kill_and_resume(root, f"kill-checkpoint-{n}", writing) for n in range(repeats)]
    return summarise_resumes("kill -9 during a checkpoint write", rows)


def summarise_resumes(fault: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    lost = [r["steps lost"] for r in rows if r["steps lost"] is not None]
    return {
        "fault": fault,
        "injected": len(rows),
        "exit": sorted({r["exit"] for r in rows}),
        "resume exact": all(r["resume exact"] for r in rows),
        "steps lost": f"{min(lost)}-{max(lost)}" if lost else None,
        "partial checkpoints skipped": sum(bool(r.get("partial left")) for r in rows),
        "messages": sorted({m for r in rows for m in r["messages"]})[:3],
    }


def full_disk(root: Path) -> dict[str, Any]:
    probe = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return {"fault": "full disk", "injected": 0, "outcome": "not run: no unshare"}
    disk = root / "disk"
    disk.mkdir()
    run_dir = disk / "run"
    path = config(root, total_steps=1_000_000)
    command = " ".join([*OAKEMU_RL, "train", "--config", str(path), "--run-dir", str(run_dir)])
    # In a private mount namespace: a 64 MiB tmpfs holds the run; once the run has written
    # two checkpoints, a file fills what is left of it.
    script = (
        f"mount -t tmpfs -o size=64m tmpfs {disk} || exit 99; "
        f"{command} --quiet > {root / 'disk.out'} 2>&1 & pid=$!; "
        f"while [ $(ls -d {run_dir}/checkpoints/step_* 2>/dev/null | wc -l) -lt 2 ]; "
        "do sleep 0.1; done; "
        f"dd if=/dev/zero of={disk}/fill bs=64k 2>/dev/null; "
        f"wait $pid; code=$?; rm -f {disk}/fill; cp -r {run_dir} {root / 'full-disk-run'}; "
        "exit $code"
    )
    result = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True, timeout=600
    )
    output = (root / "disk.out").read_text() if (root / "disk.out").exists() else ""
    copy = Training.__new__(Training)
    copy.run_dir = root / "full-disk-run"
    summary = copy.summary()
    latest = copy.checkpoints().latest()
    return {
        "fault": "full disk",
        "injected": 1,
        "exit": result.returncode,
        "newest checkpoint intact": latest is not None,
        "newest checkpoint": latest.step if latest else None,
        "summary.json written": bool(summary),
        "messages": [ln for ln in output.splitlines() if "not written" in ln or "stopped:" in ln],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", nargs="+", help="scenarios to run (default: all)")
    args = parser.parse_args()
    random.seed(0)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="oakemu-faults-") as tmp:
        root = Path(tmp)
        scenarios: dict[str, Callable[[], dict[str, Any]]] = {
            "worker-kill": lambda: worker_kills(root, args.repeats),
            "worker-stop": lambda: worker_stop(root),
            "failing-game": lambda: failing_game(root),
            "sigint2": lambda: interrupts(root, "SIGINT x2", [signal.SIGINT, signal.SIGINT]),
            "sigterm": lambda: interrupts(root, "SIGTERM", [signal.SIGTERM]),
            "sigint3": lambda: interrupts(root, "SIGINT x3", [signal.SIGINT] * 3),
            "run-kill": lambda: run_kills(root, args.repeats),
            "checkpoint-kill": lambda: checkpoint_kills(root, args.repeats),
            "full-disk": lambda: full_disk(root),
        }
        for name, scenario in scenarios.items():
            if args.only and name not in args.only:
                continue
            started = time.monotonic()
            row = scenario()
            row["scenario seconds"] = round(time.monotonic() - started, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
