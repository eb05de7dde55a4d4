"""Checkpoints: directories written atomically, with a manifest of checksums.

A checkpoint is `<root>/step_<step>/` holding the files a state adapter makes and a
`manifest.json` (step, elapsed time, run name, metrics, score, sha256 of each file).
It is written under a temporary name, every file and the directory are fsynced, and
only then is it renamed into place, so a crash never leaves a half-written
checkpoint under a real name. A checkpoint whose files do not match their checksums
(or that has no manifest) is skipped with a message saying why.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import pickle
import shutil
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from ..games.loader import file_sha256

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
_log = logging.getLogger(__name__)


class CheckpointError(RuntimeError):
    """A checkpoint is missing, partial or corrupt."""


@dataclass(frozen=True)
class CheckpointFile:
    """One file of a checkpoint: a name and its bytes."""

    name: str
    data: bytes

    @classmethod
    def from_json(cls, name: str, obj: Any) -> CheckpointFile:
        return cls(name, json.dumps(obj, indent=1, sort_keys=True).encode())

    @classmethod
    def from_torch(cls, name: str, obj: Any) -> CheckpointFile:
        """`obj` must hold only tensors and plain Python values (weights_only loadable)."""
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        return cls(name, buffer.getvalue())

    @classmethod
    def from_numpy(cls, name: str, arrays: Mapping[str, npt.NDArray[Any]]) -> CheckpointFile:
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
        return cls(name, buffer.getvalue())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Checkpoint:
    """A checkpoint directory and its manifest."""

    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, path: str | Path, *, verify: bool = True) -> Checkpoint:
        """Open a checkpoint directory, checking its manifest and (by default) checksums."""
        path = Path(path)
        manifest_path = path / MANIFEST
        if not path.is_dir():
            raise CheckpointError(f"{path}: no such checkpoint directory")
        try:
            manifest = json.loads(manifest_path.read_text())
        except FileNotFoundError:
            raise CheckpointError(f"{path}: partial checkpoint (no {MANIFEST})") from None
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path}: unreadable {MANIFEST}: {exc}") from None
        if not isinstance(manifest, dict) or "files" not in manifest or "step" not in manifest:
            raise CheckpointError(f"{path}: {MANIFEST} lacks 'files' or 'step'")
        checkpoint = cls(path, manifest)
        if verify:
            checkpoint.verify()
        return checkpoint

    def verify(self) -> None:
        """Raise CheckpointError unless every file is present and matches its checksum."""
        for name, expected in self.manifest["files"].items():
            file = self.path / name
            if not file.is_file():
                raise CheckpointError(f"{self.path}: partial checkpoint ({name} is missing)")
            actual = file_sha256(file)
            if actual != expected:
                raise CheckpointError(
                    f"{self.path}: corrupt checkpoint ({name} checksum {actual[:12]}... "
                    f"!= manifest {expected[:12]}...)"
                )

    @property
    def step(self) -> int:
        return int(self.manifest["step"])

    @property
    def elapsed_time(self) -> float:
        return float(self.manifest.get("elapsed_time", 0.0))

    @property
    def run_name(self) -> str:
        return str(self.manifest.get("run_name", ""))

    @property
    def metrics(self) -> dict[str, float]:
        return dict(self.manifest.get("metrics", {}))

    @property
    def score(self) -> float | None:
        score = self.manifest.get("score")
        return None if score is None else float(score)

    def has(self, name: str) -> bool:
        return name in self.manifest["files"]

    def file(self, name: str) -> Path:
        if not self.has(name):
            raise CheckpointError(f"{self.path}: has no file {name!r}")
        return self.path / name

    def read_bytes(self, name: str) -> bytes:
        return self.file(name).read_bytes()

    def read_json(self, name: str) -> Any:
        try:
            return json.loads(self.read_bytes(name))
        except (UnicodeDecodeError, ValueError) as exc:
            raise CheckpointError(f"{self.path / name}: not valid JSON: {exc}") from None

    def load_torch(self, name: str, map_location: str | torch.device = "cpu") -> Any:
        """Tensors and plain values only (``weights_only``): a pickle that would build
        any other object, and so could run code, is refused with CheckpointError."""
        path = self.file(name)
        if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
            raise CheckpointError(
                f"{path}: cannot be loaded (not a checkpoint file: not a zip archive)"
            )
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as exc:
            detail = _unpickling_detail(exc)
            if "GLOBAL" in detail:
                raise CheckpointError(
                    f"{self.path / name}: refused: it names objects other than tensors and "
                    f"plain values, and building them could run code ({detail})"
                ) from None
            raise CheckpointError(
                f"{self.path / name}: cannot be loaded (not a checkpoint file: {detail})"
            ) from None
        except CheckpointError:
            raise
        except Exception as exc:  # torch raises many kinds on bytes that are not a checkpoint
            raise CheckpointError(
                f"{self.path / name}: cannot be loaded ({type(exc).__name__}: {_first_line(exc)})"
            ) from None

    def load_numpy(self, name: str) -> dict[str, npt.NDArray[Any]]:
        """Arrays only (``allow_pickle=False``); anything else is a CheckpointError."""
        try:
            with np.load(self.file(name), allow_pickle=False) as data:
                return {key: data[key] for key in data.files}
        except CheckpointError:
            raise
        except Exception as exc:  # a zip that is not, an object array, a truncated member
            raise CheckpointError(
                f"{self.path / name}: cannot be loaded ({type(exc).__name__}: {_first_line(exc)})"
            ) from None


class CheckpointManager:
    """Writes checkpoints under `root` and keeps the last `keep_last` plus the `keep_best` best.

    "Best" is the highest `score` given to `save` (for example the greedy evaluation
    return); checkpoints saved without a score never count as best. Every method may be
    called from any thread: one lock keeps a save, a score and a look-up from interleaving.
    """

    def __init__(
        self,
        root: str | Path,
        keep_last: int = 3,
        keep_best: int = 1,
        *,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.root = Path(root)
        self.keep_last = max(1, keep_last)
        self.keep_best = max(0, keep_best)
        self._warn = warn or _log.warning
        self._lock = threading.RLock()

    def save(
        self,
        files: Iterable[CheckpointFile],
        *,
        step: int,
        elapsed_time: float,
        run_name: str,
        metrics: Mapping[str, float] | None = None,
        score: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Checkpoint:
        """Write a checkpoint atomically and prune old ones."""
        with self._lock:
            return self._save(files, step, elapsed_time, run_name, metrics, score, extra)

    def _save(
        self,
        files: Iterable[CheckpointFile],
        step: int,
        elapsed_time: float,
        run_name: str,
        metrics: Mapping[str, float] | None,
        score: float | None,
        extra: Mapping[str, Any] | None,
    ) -> Checkpoint:
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / f"step_{step:010d}"
        tmp = self.root / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            checksums: dict[str, str] = {}
            for item in files:
                if "/" in item.name or item.name in (MANIFEST, "", ".", ".."):
                    raise ValueError(f"bad checkpoint file name {item.name!r}")
                target = tmp / item.name
                with target.open("wb") as f:
                    f.write(item.data)
                    f.flush()
                    os.fsync(f.fileno())
                checksums[item.name] = hashlib.sha256(item.data).hexdigest()
            manifest = {
                "format": FORMAT_VERSION,
                "step": int(step),
                "elapsed_time": float(elapsed_time),
                "run_name": run_name,
                "created": time.time(),
                "metrics": {k: float(v) for k, v in (metrics or {}).items() if _finite(v)},
                "score": None if score is None or not _finite(score) else float(score),
                "files": checksums,
                **dict(extra or {}),
            }
            with (tmp / MANIFEST).open("w") as f:
                json.dump(manifest, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(tmp)
            if final.exists():
                trash = self.root / f".old-{final.name}-{uuid.uuid4().hex[:8]}"
                os.rename(final, trash)
                os.rename(tmp, final)
                shutil.rmtree(trash, ignore_errors=True)
            else:
                os.rename(tmp, final)
            _fsync_dir(self.root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.prune()
        return Checkpoint(final, manifest)

    def recover(self) -> list[str]:
        """Clean up after a process killed in the middle of a save; returns what was done.

        A kill before the final rename leaves a `.tmp-*` directory: a partial checkpoint,
        removed. A kill while an existing checkpoint of the same step was being replaced
        leaves it renamed `.old-*` with no checkpoint under its real name: it is put back.
        """
        notes: list[str] = []
        with self._lock:
            if not self.root.is_dir():
                return notes
            for old in sorted(self.root.glob(".old-step_*")):
                name = old.name[len(".old-") :].rsplit("-", 1)[0]
                final = self.root / name
                if final.exists():
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.rename(old, final)
                    notes.append(f"put back {name}, whose replacement was interrupted")
            for partial in sorted(self.root.glob(".tmp-*")):
                shutil.rmtree(partial, ignore_errors=True)
                notes.append(f"removed {partial.name}, a checkpoint whose write was interrupted")
        return notes

    def set_score(self, step: int, score: float) -> Checkpoint | None:
        """Give the checkpoint of `step` a score (rewriting its manifest atomically)."""
        with self._lock:
            return self._set_score(step, score)

    def _set_score(self, step: int, score: float) -> Checkpoint | None:
        path = self.root / f"step_{step:010d}"
        if not (path / MANIFEST).is_file():
            return None
        checkpoint = Checkpoint.open(path, verify=False)
        checkpoint.manifest["score"] = float(score) if _finite(score) else None
        tmp = path / f".{MANIFEST}.tmp"
        with tmp.open("w") as f:
            json.dump(checkpoint.manifest, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path / MANIFEST)
        _fsync_dir(path)
        self.prune()
        return checkpoint

    def _candidates(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(
            (p for p in self.root.iterdir() if p.is_dir() and p.name.startswith("step_")),
            key=lambda p: p.name,
        )

    def list(self, *, verify: bool = False) -> list[Checkpoint]:
        """Checkpoints with a readable manifest, oldest first (others skipped, with a message)."""
        found = []
        with self._lock:
            for path in self._candidates():
                try:
                    found.append(Checkpoint.open(path, verify=verify))
                except CheckpointError as exc:
                    self._warn(f"skipping checkpoint: {exc}")
        return found

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint that passes its checksums; corrupt ones are skipped."""
        with self._lock:
            return self._first_valid(reversed(self.list()))

    def _first_valid(self, checkpoints: Iterable[Checkpoint]) -> Checkpoint | None:
        for checkpoint in checkpoints:
            try:
                checkpoint.verify()
            except CheckpointError as exc:
                self._warn(f"skipping checkpoint: {exc}")
                continue
            return checkpoint
        return None

    def best(self) -> Checkpoint | None:
        """The checkpoint with the highest score that passes its checksums."""
        with self._lock:
            scored = [c for c in self.list() if c.score is not None]
            scored.sort(key=lambda c: (c.score, c.step), reverse=True)
            return self._first_valid(scored)

    def prune(self) -> None:
        """Delete all but the last `keep_last` and the `keep_best` best; remove temp leftovers."""
        with self._lock:
            self._prune()

    def _prune(self) -> None:
        checkpoints = self.list()
        keep = {c.path for c in checkpoints[-self.keep_last :]}
        scored = sorted(
            (c for c in checkpoints if c.score is not None),
            key=lambda c: (c.score, c.step),
            reverse=True,
        )
        keep.update(c.path for c in scored[: self.keep_best])
        for checkpoint in checkpoints:
            if checkpoint.path not in keep:
                shutil.rmtree(checkpoint.path, ignore_errors=True)
        for leftover in self.root.glob(".tmp-*"):
            shutil.rmtree(leftover, ignore_errors=True)


def _unpickling_detail(exc: BaseException) -> str:
    """The line of torch's weights-only error that says what was wrong (not its advice)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "GLOBAL" in line or line.startswith("Unsupported"):
            return line
    return lines[0] if lines else type(exc).__name__


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().split("\n", 1)[0]


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
