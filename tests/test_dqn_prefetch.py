"""The learner's batch prefetch: same results as preparing each batch in line."""

from __future__ import annotations

import shutil
import sysconfig
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from oakemu_rl.dqn.action_masker import ActionMasker
from oakemu_rl.dqn.config import DQNExperimentConfiguration
from oakemu_rl.dqn.learner import Learner
from oakemu_rl.dqn.replay_buffer import ReplayBuffer, Transition
from oakemu_rl.experiments import DQNExperiment
from oakemu_rl.experiments.torch_setup import build_optimizer
from oakemu_rl.runtime.context import RuntimeContext
from oakemu_rl.runtime.replay_ratio_gate import ReplayRatioGate
from oakemu_rl.runtime.thread_safe_model import ThreadSafeModel

SHAPE = (2, 16, 16)


def filled_buffer(prioritized: bool) -> ReplayBuffer:
    buffer = ReplayBuffer(2_000, SHAPE, frame_stack=2, n_step=3, gamma=0.9, prioritized=prioritized)
    rng = np.random.default_rng(5)
    for env in range(4):
        obs = rng.integers(0, 255, SHAPE, dtype=np.uint8)
        for i in range(150):
            frame = rng.integers(0, 255, (1, *SHAPE[1:]), dtype=np.uint8)
            next_obs = np.concatenate([obs[1:], frame])
            reward = float(rng.normal())
            done = i == 149
            buffer.add(
                Transition(env, obs, int(rng.integers(3)), reward, next_obs, done, False, i == 0)
            )
            obs = next_obs
    return buffer


def make_learner(
    prefetch: bool, settings: dict[str, Any], tmp_path: Path, compile: bool = False
) -> Learner:
    config = DQNExperimentConfiguration.from_dict(
        {
            "model": {"torso": "small_cnn", "head_hidden": 32, "compile": compile},
            "replay": {"prioritized": settings.pop("prioritized", False)},
            "learner": {"prefetch": prefetch, "batch_size": 16, **settings},
        }
    )
    context: RuntimeContext[DQNExperimentConfiguration] = RuntimeContext(
        config=config, device=torch.device("cpu"), run_dir=tmp_path, seed=3, torch_threads=1
    )
    torch.manual_seed(0)
    model = DQNExperiment.build_model(config, SHAPE, 3)
    target = DQNExperiment.build_model(config, SHAPE, 3)
    buffer = filled_buffer(config.replay.prioritized)
    return Learner(
        context,
        ThreadSafeModel(model),
        target,
        build_optimizer(model, 1e-3, 1e-4),
        lambda: buffer,
        ReplayRatioGate(1.0, 0, 64),
        ActionMasker(3),
        lambda: 500,
    )


def run_updates(learner: Learner, updates: int, hold_at: int | None = None) -> dict[str, Any]:
    """Run `updates` updates on a thread of their own, like the learner thread; with
    `hold_at`, take the learner's state under `hold()` after that many updates."""
    out: dict[str, Any] = {}

    def body() -> None:
        learner.context.enter_thread()
        if learner.config.prefetch:
            learner.prefetcher.start()
        try:
            for n in range(updates):
                if n == hold_at:
                    with learner.hold():
                        out["held_state"] = learner.state_dict()
                learner.update()
        finally:
            learner.prefetcher.close()

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(120)
    out["weights"] = {k: v.clone() for k, v in learner.model.state_dict().items()}
    out["target"] = {k: v.clone() for k, v in learner.target_model.state_dict().items()}
    out["rng"] = learner.rng.bit_generator.state
    return out


@pytest.mark.parametrize(
    "settings",
    [
        {"double_dqn": False, "target": {"type": "hard", "period": 3}},
        {"double_dqn": True, "target": {"type": "hard", "period": 4}, "prioritized": True},
        {"double_dqn": True, "target": {"type": "polyak", "tau": 0.1}},
    ],
    ids=["hard-target", "double-prioritized", "polyak"],
)
def test_prefetching_learner_matches_inline_learner_exactly(
    settings: dict[str, Any], tmp_path: Path
) -> None:
    inline = run_updates(make_learner(False, dict(settings), tmp_path), 12, hold_at=7)
    prefetching_learner = make_learner(True, dict(settings), tmp_path)
    prefetched = run_updates(prefetching_learner, 12, hold_at=7)
    assert prefetching_learner.prefetcher.pending is False
    for key in ("weights", "target"):
        for name, tensor in inline[key].items():
            assert torch.equal(tensor, prefetched[key][name]), f"{key} {name} differs"
    assert inline["rng"] == prefetched["rng"]
    # Under hold() the prefetched batch is given back: the sampling RNG saved in a
    # checkpoint is the one a learner that never looked ahead would have.
    assert inline["held_state"]["rng"] == prefetched["held_state"]["rng"]
    assert inline["held_state"]["updates"] == prefetched["held_state"]["updates"] == 7


@pytest.mark.slow
# torch's inductor, imported by torch.compile, defines script methods of its own and so
# warns about itself; a run never shows it (Python hides DeprecationWarnings outside
# __main__), and the warning says nothing about this code.
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.skipif(
    (shutil.which("g++") is None and shutil.which("c++") is None)
    or not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file(),
    reason="torch.compile on CPU needs a C++ compiler and Python's headers",
)
def test_compiled_learner_trains_like_the_eager_one(tmp_path: Path) -> None:
    # model.compile: the learner's and target network's forward passes run as compiled
    # graphs (double DQN's online values on the prefetch thread too). The generated kernels
    # may sum in another order, so the weights agree to float precision, not bit for bit.
    settings = {"double_dqn": True, "target": {"type": "hard", "period": 4}}
    eager = run_updates(make_learner(True, dict(settings), tmp_path), 6)
    compiled_learner = make_learner(True, dict(settings), tmp_path, compile=True)
    compiled = run_updates(compiled_learner, 6)
    assert compiled_learner.updates == 6
    initial = make_learner(False, {}, tmp_path).model.state_dict()
    for key in ("weights", "target"):
        for name, tensor in eager[key].items():
            assert torch.allclose(tensor, compiled[key][name], atol=1e-5), f"{key} {name}"
    assert any(not torch.equal(initial[k], v) for k, v in compiled["weights"].items())
    assert eager["rng"] == compiled["rng"]


def test_prefetch_error_reaches_the_learner(tmp_path: Path) -> None:
    learner = make_learner(True, {}, tmp_path)
    empty = ReplayBuffer(100, SHAPE, frame_stack=2)
    learner.prefetcher._replay_buffer = lambda: empty
    learner.prefetcher.start()
    try:
        learner.prefetcher.request(0.4)
        with pytest.raises(
            RuntimeError, match="batch prefetch failed: cannot sample from an empty"
        ):
            learner.prefetcher.take(0.4)
    finally:
        learner.prefetcher.close()


def test_bf16_learner_trains_close_to_fp32(tmp_path: Path) -> None:
    # Mixed precision changes the arithmetic, not the algorithm: after a few updates the
    # weights are near the float32 run's and still float32.
    fp32 = run_updates(make_learner(True, {}, tmp_path), 6)
    bf16_learner = make_learner(True, {"precision": "bf16"}, tmp_path)
    bf16 = run_updates(bf16_learner, 6)
    for name, tensor in fp32["weights"].items():
        other = bf16["weights"][name]
        assert other.dtype == torch.float32
        assert torch.allclose(tensor, other, atol=5e-3), name


def test_submitted_jobs_run_on_the_prefetch_thread_and_report_errors(tmp_path: Path) -> None:
    prefetcher = make_learner(True, {}, tmp_path).prefetcher
    assert prefetcher.submit(threading.current_thread).result() is threading.current_thread()
    prefetcher.start()
    try:
        ran_on = prefetcher.submit(threading.current_thread).result(timeout=10)
        assert ran_on.name == "batch-prefetch"

        def broken() -> None:
            raise ValueError("job failed")

        with pytest.raises(ValueError, match="job failed"):
            prefetcher.submit(broken).result(timeout=10)
    finally:
        prefetcher.close()
