"""Snapshot files: .z80 (versions 1-3), .sna and .szx, read and written."""

from __future__ import annotations

from pathlib import Path

from ..errors import SnapshotError
from .model import PAGE_SIZE, PAGES_48K, MachineModel, Registers, Snapshot
from .sna import read_sna, write_sna
from .szx import read_szx, write_szx
from .z80 import read_z80, write_z80

READERS = {".z80": read_z80, ".sna": read_sna, ".szx": read_szx}
WRITERS = {".z80": write_z80, ".sna": write_sna, ".szx": write_szx}

__all__ = [
    "PAGES_48K",
    "PAGE_SIZE",
    "MachineModel",
    "Registers",
    "Snapshot",
    "SnapshotError",
    "load_snapshot",
    "read_sna",
    "read_szx",
    "read_z80",
    "save_snapshot",
    "write_sna",
    "write_szx",
    "write_z80",
]


def load_snapshot(path: str | Path) -> Snapshot:
    """Read a snapshot file, choosing the format by its extension.

    Raises SnapshotError naming the file when it is missing, of an unknown
    format, corrupt or truncated.
    """
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise SnapshotError(
            path, f"unknown snapshot format {path.suffix!r}; expected one of .z80, .sna, .szx"
        )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SnapshotError(path, "file not found") from None
    except IsADirectoryError:
        raise SnapshotError(path, "is a directory, expected a snapshot file") from None
    except OSError as exc:
        raise SnapshotError(path, f"cannot be read: {exc.strerror or exc}") from None
    if not data:
        raise SnapshotError(path, "file is empty")
    return reader(data, path)


def save_snapshot(snapshot: Snapshot, path: str | Path) -> None:
    """Write a snapshot file in the format its extension names."""
    path = Path(path)
    writer = WRITERS.get(path.suffix.lower())
    if writer is None:
        raise SnapshotError(
            path, f"unknown snapshot format {path.suffix!r}; expected one of .z80, .sna, .szx"
        )
    path.write_bytes(writer(snapshot))
