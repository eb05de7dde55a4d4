"""Checkpoints: atomic directories, checksums, corrupt ones skipped, keep last K and best."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from oakemu_rl.runtime.checkpoints import (
    Checkpoint,
    CheckpointError,
    CheckpointFile,
    CheckpointManager,
)


def files(value: int) -> list[CheckpointFile]:
    return [
        CheckpointFile.from_json("state.json", {"value": value}),
        CheckpointFile.from_torch("model.pt", {"w": torch.full((3,), float(value))}),
        CheckpointFile.from_numpy("data.npz", {"a": np.arange(value)}),
    ]


def test_save_and_read_back(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=3)
    saved = manager.save(
        files(4), step=100, elapsed_time=1.5, run_name="r", metrics={"x": 2.0, "bad": float("nan")}
    )
    assert saved.path.name == "step_0000000100"
    manifest = json.loads((saved.path / "manifest.json").read_text())
    assert manifest["step"] == 100 and manifest["run_name"] == "r"
    assert manifest["metrics"] == {"x": 2.0}
    assert set(manifest["files"]) == {"state.json", "model.pt", "data.npz"}
    assert all(len(digest) == 64 for digest in manifest["files"].values())
    checkpoint = Checkpoint.open(saved.path)
    assert checkpoint.read_json("state.json") == {"value": 4}
    assert torch.equal(checkpoint.load_torch("model.pt")["w"], torch.full((3,), 4.0))
    np.testing.assert_array_equal(checkpoint.load_numpy("data.npz")["a"], np.arange(4))
    assert not list(tmp_path.glob(".tmp-*"))


def test_corrupt_and_partial_checkpoints_are_skipped(tmp_path: Path) -> None:
    warnings: list[str] = []
    manager = CheckpointManager(tmp_path, keep_last=5, warn=warnings.append)
    manager.save(files(1), step=1, elapsed_time=0, run_name="r")
    second = manager.save(files(2), step=2, elapsed_time=0, run_name="r")
    third = manager.save(files(3), step=3, elapsed_time=0, run_name="r")
    data = bytearray((third.path / "model.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (third.path / "model.pt").write_bytes(bytes(data))
    assert manager.latest() == Checkpoint.open(second.path)
    assert any("corrupt checkpoint" in w and "model.pt" in w for w in warnings)
    with pytest.raises(CheckpointError, match="corrupt"):
        Checkpoint.open(third.path)
    (second.path / "manifest.json").unlink()  # a partial checkpoint
    assert manager.latest() is not None and manager.latest().step == 1  # type: ignore[union-attr]
    assert any("partial checkpoint" in w for w in warnings)
    (tmp_path / "step_0000000001" / "state.json").unlink()
    assert manager.latest() is None
    assert any("state.json is missing" in w for w in warnings)


def test_keep_last_and_best(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=2, keep_best=1)
    scores = {10: 1.0, 20: 9.0, 30: 3.0, 40: None, 50: 2.0}
    for step, score in scores.items():
        manager.save(files(step), step=step, elapsed_time=0, run_name="r", score=score)
    assert [c.step for c in manager.list()] == [20, 40, 50]
    assert manager.best().step == 20  # type: ignore[union-attr]
    manager.set_score(50, 99.0)
    assert manager.best().step == 50  # type: ignore[union-attr]
    assert [c.step for c in manager.list()] == [40, 50]
    manager.save(files(5), step=50, elapsed_time=0, run_name="r", score=1.0)  # same step: replaced
    assert Checkpoint.open(tmp_path / "step_0000000050").read_json("state.json") == {"value": 5}
