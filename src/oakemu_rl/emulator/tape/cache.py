"""The machine state after loading a tape, cached as an .szx file keyed by the tape's hash.

Loading a tape runs the ROM for a second or so; the state it leads to depends only
on the tape's bytes (and this loader), so it is kept in `<cache_dir>/<stem>-<sha256>.v1.szx`
and reused while the tape is unchanged. A cache that cannot be read or written is
passed over: the tape is then loaded in memory.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import SnapshotError
from ..snapshots import Snapshot, read_szx, write_szx
from .formats import Tape, read_tape
from .loader import load_tape

CACHE_DIR_NAME = ".oakemu-cache"
LOADER_VERSION = 1  # bump when a change to the loader changes the state it leads to


def cache_file(tape: Tape, cache_dir: Path) -> Path:
    """Where the state loaded from `tape` is cached in `cache_dir`."""
    return cache_dir / f"{tape.path.stem}-{tape.sha256}.v{LOADER_VERSION}.szx"


def tape_snapshot(path: str | Path, cache_dir: str | Path | None = None) -> Snapshot:
    """The machine once the tape at `path` has loaded (see `load_tape`), from the cache in
    `cache_dir` when it holds this tape's state. Raises TapeError naming the tape."""
    tape = read_tape(path)
    cached = cache_file(tape, Path(cache_dir)) if cache_dir is not None else None
    if cached is not None:
        try:
            return read_szx(cached.read_bytes(), cached)
        except (OSError, SnapshotError):
            pass  # not cached yet, unreadable or damaged: load the tape
    data = write_szx(load_tape(tape).snapshot)
    if cached is not None:
        _write_atomically(cached, data)
    # Through the file format either way, so a cached and a fresh load give the same state.
    return read_szx(data, cached or tape.path)


def _write_atomically(target: Path, data: bytes) -> bool:
    """Write `data` to `target` via a temporary file; False when the folder is not writable."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except OSError:
        Path(temporary).unlink(missing_ok=True)
        return False
    return True
