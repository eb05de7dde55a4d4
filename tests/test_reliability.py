"""A run that survives: worker faults, a full disk, interrupts, kill -9, and data that
would run code. Real runs, real worker processes, real signals."""

from __future__ import annotations

import errno
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from oakemu_rl.envs import OakEmuMultiEnv
from oakemu_rl.envs.gym_backend import GymBackendEnv
from oakemu_rl.experiments import EXPERIMENTS, Experiment, RunFailed, stop_on_signals
from oakemu_rl.experiments.stop_signals import RunAborted
from oakemu_rl.runtime.checkpoints import CheckpointManager
from oakemu_rl.runtime.config_base import CodeNotAllowedError, ExperimentConfiguration
from test_experiment import cartpole

pytestmark = pytest.mark.timeout(180)

OAKEMU_RL = [sys.executable, "-m", "oakemu_rl.cli.main"]


def process_run(algo: str, **overrides: Any) -> ExperimentConfiguration:
    """A small CartPole run on two worker processes, at normal priority: under pytest-xdist
    the other test process keeps both cores busy, and the default idle-priority workers
    would get only what it leaves (a 6,144-step run took 161 s instead of 14 s)."""
    env = {"num_envs": 4, "backend": "process", "num_workers": 2, "worker_nice": 0}
    env.update(overrides.pop("env", {}))
    return cartpole(algo, env=env, **overrides)


def experiment(config: ExperimentConfiguration, run_dir: Path, **kwargs: Any) -> Experiment[Any]:
    return EXPERIMENTS[config.algo](
        config, run_dir, console=False, print_fn=lambda _: None, **kwargs
    )


def when(condition: Callable[[], bool], then: Callable[[], None]) -> threading.Thread:
    """Run `then` on a thread as soon as `condition` holds."""

    def watch() -> None:
        deadline = time.monotonic() + 120
        while not condition():
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)
        then()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


# -- worker faults -----------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_training_goes_on_through_a_killed_worker(algo: str, tmp_path: Path) -> None:
    config = process_run(
        algo, total_steps=6144, logging={"tensorboard": True, "log_every_steps": 256}
    )
    run = experiment(config, tmp_path / "run")
    run.build()
    killed: list[int] = []

    def kill_one() -> None:
        pid = run.env.worker_pids[1]
        killed.append(pid)
        os.kill(pid, signal.SIGKILL)

    when(lambda: run.actor.steps >= 1024, kill_one)
    summary = run.run()
    assert killed
    assert summary["steps"] == 6144 and summary["stop_reason"] == "step budget reached"
    assert summary["worker_restarts"] == 1 and summary["fault"] is None
    assert summary["truncated"] >= 1  # the episodes it held ended as truncated
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["worker_restarts"] == 1
    assert scalars(tmp_path / "run", "faults/worker_restarts")[-1][1] == 1.0


class BreakingCartPole(GymBackendEnv):
    """CartPole whose reset fails for good once `marker` exists (a game that broke)."""

    def __init__(self, env_id: int, marker: str) -> None:
        super().__init__("gym:CartPole-v1")
        self.marker = marker

    def reset(self, **kwargs: Any) -> Any:
        if os.path.exists(self.marker):
            raise RuntimeError("the start procedure never reaches the game")
        return super().reset(**kwargs)


def test_a_game_that_keeps_failing_stops_the_run_cleanly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="oakemu_rl.envs.multi_env")
    marker = tmp_path / "broken"
    config = process_run("dqn", total_steps=50_000)

    def envs() -> OakEmuMultiEnv:
        return OakEmuMultiEnv(
            env_factory=functools.partial(BreakingCartPole, marker=str(marker)),
            num_envs=4,
            num_workers=2,
            restart_workers=True,
            max_restarts_per_minute=4,
            restart_backoff=0.01,
        )

    run = experiment(config, tmp_path / "run", env_factory=envs)
    run.build()
    when(lambda: run.actor.steps >= 600, marker.touch)
    with pytest.raises(RunFailed) as failed:
        run.run()
    message = str(failed.value)
    assert "gym:CartPole-v1" in message and "the start procedure never reaches the game" in message
    assert "4 restarts in the last minute" in message
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["fault"] == message and summary["worker_restarts"] == 4
    assert summary["stop_reason"].startswith("env worker fault")
    latest = CheckpointManager(tmp_path / "run" / "checkpoints").latest()
    assert latest is not None and latest.step == summary["steps"] > 600  # the final checkpoint
    tracebacks = [r for r in caplog.records if "Traceback" in r.getMessage()]
    assert len(tracebacks) == 1  # shown once, not once per restart


# -- a checkpoint that cannot be written -------------------------------------------------


def full_disk(failing: Callable[[int], bool], monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Checkpoint writes number n (from 0) fail with ENOSPC where `failing(n)`, as on a full
    disk; returns the steps written."""
    save = CheckpointManager._save
    written: list[int] = []
    attempts = [0]

    def save_or_fail(self: CheckpointManager, files: Any, step: int, *args: Any) -> Any:
        attempt = attempts[0]
        attempts[0] += 1
        if failing(attempt):
            # What a full disk does: a file half written, then ENOSPC.
            partial = self.root / f".tmp-step_{step:010d}-full"
            partial.mkdir(parents=True, exist_ok=True)
            (partial / "model.pt").write_bytes(b"\0" * 100)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(partial / "model.pt"))
        checkpoint = save(self, files, step, *args)
        written.append(step)
        return checkpoint

    monkeypatch.setattr(CheckpointManager, "_save", save_or_fail)
    return written


def test_a_full_disk_stops_the_run_cleanly_and_keeps_the_last_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = full_disk(lambda n: n >= 2, monkeypatch)
    messages: list[str] = []
    config = cartpole("dqn", total_steps=20_000)
    run = EXPERIMENTS["dqn"](config, tmp_path / "run", console=False, print_fn=messages.append)
    with pytest.raises(RunFailed, match="No space left on device"):
        run.run()
    assert written == [512, 1024]
    assert run.actor.steps < 4096  # it stopped at the failed write, not at the budget
    assert any("checkpoint at step 1,536 not written" in m and "step_0000001024 is intact" in m
               for m in messages)  # fmt: skip
    monkeypatch.undo()
    manager = CheckpointManager(tmp_path / "run" / "checkpoints")
    latest = manager.latest()
    assert latest is not None and latest.step == 1024
    latest.verify()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "not written" in summary["fault"]


def test_a_full_disk_with_on_write_error_continue_trains_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = full_disk(lambda n: n in (1, 2), monkeypatch)  # then space is freed
    config = cartpole("ppo", total_steps=2048, checkpoint={"on_write_error": "continue"})
    summary = experiment(config, tmp_path / "run").run()
    assert summary["steps"] == 2048 and summary["fault"] is None
    assert written == [512, 2048]
    assert not list((tmp_path / "run" / "checkpoints").glob(".tmp-*"))  # partial ones pruned


# -- code from data ----------------------------------------------------------------------

EVIL_MODULE = """
from pathlib import Path
Path({marker!r}).write_text("ran")

def shaper(reward, info):
    return reward
"""


@pytest.fixture
def evil_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module that leaves a marker file when it is imported."""
    marker = tmp_path / "code-ran"
    (tmp_path / "evil_shaping.py").write_text(EVIL_MODULE.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    return marker


def test_a_config_that_names_code_is_refused_unless_allowed(
    tmp_path: Path, evil_module: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from oakemu_rl.cli.main import main

    config = cartpole("dqn", total_steps=256)
    data = config.model_dump(mode="json")
    data["reward_shaping"] = [{"type": "callable", "target": "evil_shaping:shaper"}]
    path = tmp_path / "evil.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["train", "--config", str(path), "--run-dir", str(tmp_path / "r1")]) == 2
    err = capsys.readouterr().err
    assert "reward_shaping[0] calls 'evil_shaping:shaper'" in err and "--allow-code" in err
    assert not evil_module.exists() and not (tmp_path / "r1").exists()
    # A run directory planted with the same config: --resume refuses it too.
    planted = tmp_path / "planted"
    (planted / "checkpoints").mkdir(parents=True)
    (planted / "config.yaml").write_text(yaml.safe_dump(data))
    assert main(["train", "--resume", str(planted), "--steps", "512"]) == 2
    assert "--allow-code" in capsys.readouterr().err and not evil_module.exists()
    # Only the flag as spelled allows it: argparse would take an abbreviation.
    for short in ("--allow", "--all"):
        with pytest.raises(SystemExit):
            main(["train", "--config", str(path), short, "--run-dir", str(tmp_path / "r4")])
        assert f"unrecognized arguments: {short}" in capsys.readouterr().err
    assert not evil_module.exists() and not (tmp_path / "r4").exists()
    # In Python, too, unless the caller allows it.
    with pytest.raises(CodeNotAllowedError):
        experiment(EXPERIMENTS["dqn"].config_type.from_dict(data), tmp_path / "r2")
    # Allowed: it runs.
    quiet = ["--quiet", "--run-dir", str(tmp_path / "r3")]
    assert main(["train", "--config", str(path), "--allow-code", *quiet]) == 0
    assert evil_module.read_text() == "ran"


def test_a_gym_id_with_a_module_is_refused_unless_allowed(
    tmp_path: Path, evil_module: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from oakemu_rl.cli.main import main

    args = ["train", "--game", "gym:evil_shaping:Nothing-v0", "--run-dir", str(tmp_path / "r")]
    assert main(args) == 2
    assert "imports the module 'evil_shaping'" in capsys.readouterr().err
    assert not evil_module.exists() and not (tmp_path / "r").exists()


class Planted:
    """Runs a command when unpickled, as a malicious checkpoint would."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    experiment(cartpole("dqn", total_steps=1024), run_dir).run()
    return run_dir


def replace_model(checkpoint_dir: Path, data: bytes) -> None:
    """Put `data` in the checkpoint's model.pt and make the manifest's checksum match."""
    import hashlib

    (checkpoint_dir / "model.pt").write_bytes(data)
    manifest = json.loads((checkpoint_dir / "manifest.json").read_text())
    manifest["files"]["model.pt"] = hashlib.sha256(data).hexdigest()
    (checkpoint_dir / "manifest.json").write_text(json.dumps(manifest))


def copy_run(run_dir: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(run_dir, to)
    return to


def test_a_malicious_or_corrupt_checkpoint_is_refused_with_the_projects_error(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    import torch

    from oakemu_rl.cli.main import main

    marker = tmp_path / "pickle-ran"
    buffer = io.BytesIO()
    torch.save({"learner": Planted(marker)}, buffer)
    evil = copy_run(finished_run, tmp_path / "evil")
    replace_model(CheckpointManager(evil / "checkpoints").list()[-1].path, buffer.getvalue())
    assert main(["evaluate", str(evil), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "model.pt: refused" in err and "Traceback" not in err
    assert main(["train", "--resume", str(evil), "--steps", "4096", "--quiet"]) == 2
    assert "model.pt: refused" in capsys.readouterr().err
    assert not marker.exists()

    corrupt = copy_run(finished_run, tmp_path / "corrupt")
    replace_model(CheckpointManager(corrupt / "checkpoints").list()[-1].path, os.urandom(4096))
    assert main(["evaluate", str(corrupt), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "model.pt: cannot be loaded" in err and "Traceback" not in err


# -- run directories and resume ------------------------------------------------------------


def test_a_failed_start_leaves_no_run_directory(tmp_path: Path) -> None:
    def broken() -> OakEmuMultiEnv:
        raise OSError("the game's snapshot is gone")

    run_dir = tmp_path / "run"
    config = cartpole("ppo")
    with pytest.raises(OSError, match="snapshot is gone"):
        experiment(config, run_dir, env_factory=broken).run()
    assert not run_dir.exists()
    assert experiment(config, run_dir).run()["steps"] == config.total_steps  # the retry runs


def test_resume_skips_a_checkpoint_whose_write_was_killed(
    finished_run: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(finished_run, tmp_path / "run")
    checkpoints = run_dir / "checkpoints"
    newest = CheckpointManager(checkpoints).latest()
    assert newest is not None and newest.step == 1024
    # What kill -9 leaves: a checkpoint written under its temporary name (replay buffer and
    # all), and a replacement of step 1024 caught between its two renames.
    partial = checkpoints / ".tmp-step_0000001536-deadbeef"
    partial.mkdir()
    (partial / "model.pt").write_bytes(b"half")
    os.rename(newest.path, checkpoints / ".old-step_0000001024-cafef00d")
    messages: list[str] = []
    resumed = EXPERIMENTS["dqn"].from_run_dir(
        run_dir, total_steps=2048, console=False, print_fn=messages.append
    )
    summary = resumed.run()
    assert summary["resumed_from_step"] == 1024 and summary["steps"] == 2048
    text = "\n".join(messages)
    assert "put back step_0000001024" in text
    assert "removed .tmp-step_0000001536-deadbeef" in text
    assert not partial.exists()


# -- interrupts (the real command, real signals to its process group) -----------------------


def start_training(run_dir: Path, tmp_path: Path, steps: int = 1_000_000) -> subprocess.Popen[str]:
    config = cartpole("dqn", total_steps=steps, env={"backend": "process", "num_workers": 2})
    path = tmp_path / "config.yaml"
    path.write_text(config.to_yaml())
    process = subprocess.Popen(
        [*OAKEMU_RL, "train", "--config", str(path), "--run-dir", str(run_dir), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("run directory:"):
            break
    time.sleep(1.0)  # training under way
    return process


def session_processes(sid: int) -> list[int]:
    """Live processes of session `sid` (the command's own and its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


def shm_names() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.mark.parametrize(
    ("signals", "code"),
    [
        ([signal.SIGINT, signal.SIGINT], 0),
        ([signal.SIGTERM], 0),
        ([signal.SIGINT, signal.SIGINT, signal.SIGINT], 130),
    ],
    ids=["two-sigints", "sigterm", "three-sigints"],
)
def test_interrupts_end_with_a_checkpoint_and_leave_nothing_behind(
    signals: list[signal.Signals], code: int, tmp_path: Path
) -> None:
    shm_before = shm_names()
    run_dir = tmp_path / "run"
    process = start_training(run_dir, tmp_path)
    for sig in signals:
        os.killpg(process.pid, sig)
        time.sleep(0.005)  # an impatient user; the run takes longer than this to stop
    _, err = process.communicate(timeout=60)
    clean_after_all = len(signals) == 3 and process.returncode == 0
    assert process.returncode == code or clean_after_all, err
    if clean_after_all:
        code = 0
    deadline = time.monotonic() + 5
    while session_processes(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert session_processes(process.pid) == []
    assert shm_names() - shm_before == set()
    if code == 130:
        assert "aborting without a final checkpoint" in err
        return
    if clean_after_all:
        # Rarely, the run stops within the 10 ms between the first and the third signal
        # (the loop looks at the stop request four times a second): the third comes too
        # late to abort anything, and the run must have stopped cleanly.
        assert "aborting" not in err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == f"stopped by {signals[0].name}"
    latest = CheckpointManager(run_dir / "checkpoints").latest()
    assert latest is not None and latest.step == summary["steps"] > 0


class Recorder:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def request_stop(self, reason: str) -> None:
        self.reasons.append(reason)


def test_two_signals_ask_for_a_stop_and_the_third_sigint_aborts() -> None:
    run = Recorder()
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunAborted), stop_on_signals(run):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert run.reasons == ["stopped by SIGTERM", "stopped by SIGINT"]
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_kill_9_in_the_middle_of_training_resumes_from_the_last_complete_checkpoint(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    process = start_training(run_dir, tmp_path)
    checkpoints = CheckpointManager(run_dir / "checkpoints")
    deadline = time.monotonic() + 60
    while len(checkpoints.list()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    deadline = time.monotonic() + 5
    while session_processes(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert session_processes(process.pid) == []
    latest = checkpoints.latest()
    assert latest is not None
    result = subprocess.run(
        [*OAKEMU_RL, "train", "--resume", str(run_dir), "--steps", str(latest.step + 1024)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"from {latest.path.name}: step {latest.step:,}" in result.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["resumed_from_step"] == latest.step
    assert summary["steps"] == latest.step + 1024


# -- every CLI mistake: one line naming what is wrong, exit code 2 ---------------------------


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from oakemu_rl.cli.main import main

    try:
        code = main(args)
    except SystemExit as exit_:  # argparse's own errors
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


def test_cli_mistakes_get_a_message_naming_what_is_wrong(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "shots.png").write_bytes(b"a picture")
    (tmp_path / "game.sna").write_bytes(bytes([0xF3, 0xFF, 0x00]) * 100)
    undecodable = copy_run(finished_run, tmp_path / "undecodable")
    replace_model(CheckpointManager(undecodable / "checkpoints").list()[-1].path, b"\x80\x04K")
    cases = [
        (["inspect", "catch", "--height", "0"], "argument --height: must be 8-192, got 0"),
        (["inspect", "catch", "--seed", "-1"], "argument --seed: must be 0 or more, got -1"),
        (["inspect", "catch", "--out", str(tmp_path / "shots.png")], "shots.png: is a file"),
        (["train", "--config", str(tmp_path / "game.sna")], "game.sna: cannot be read"),
        (["train", "--game", "gym:NoSuchEnv-v9"], "gym:NoSuchEnv-v9: no Gymnasium env"),
        (["evaluate", str(undecodable)], "model.pt: cannot be loaded"),
        (["train", "--resume", str(finished_run), "--steps", "512"], "is at step 1,024 already"),
        (["train", "--resume", str(tmp_path / "nowhere")], "nowhere is not a directory"),
    ]
    for args, expected in cases:
        code, err = cli(args, capsys)
        assert code == 2, (args, err)
        assert expected in err, (args, err)
        assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()
