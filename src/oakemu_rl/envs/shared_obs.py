"""Shared-memory observation slots for OakEmuMultiEnv.

Every env owns `SLOTS_PER_ENV` fixed-size slots in one shared buffer; a worker
writes each new observation into the env's next slot and tells the parent which
one, so observations never travel through a pipe.

Ownership: the parent creates the buffer and is the only one that frees it.
Workers map it and write only into the slot named in the command they are
executing; the parent never writes. Why three slots: one step with auto-reset
fills two (the final observation and the first of the next episode), and the
observation of the previous result must survive the next step, so that an actor
can build (s, a, r, s') from two consecutive results without copying.

Backing store, in order of preference:

- ``memfd`` (Linux): an anonymous memory file passed to the workers as a file
  descriptor. It has no name, so nothing can leak: the kernel frees it when the
  last process that maps it exits, however that process ends.
- ``posix``: a named ``multiprocessing.shared_memory`` segment (``/dev/shm``).
  The parent unlinks it on close; if the parent is killed, multiprocessing's
  resource tracker unlinks it.
- ``local``: a plain numpy array, for the inline backend.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from dataclasses import dataclass
from multiprocessing import reduction, shared_memory
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

SLOTS_PER_ENV = 3
_ALIGN = 64

SlotKind = Literal["memfd", "posix", "local"]


def default_slot_kind() -> SlotKind:
    """``memfd`` where the platform has it, else ``posix``."""
    return "memfd" if hasattr(os, "memfd_create") else "posix"


def _rebuild_fd(dup: Any) -> int:
    fd: int = dup.detach()
    return fd


class _InheritedFd:
    """A file descriptor that travels to a child process when pickled at spawn time."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return _rebuild_fd, (reduction.DupFd(self.fd),)


@dataclass(frozen=True)
class SlotLayout:
    """Shape and dtype of one observation, and how many envs have slots."""

    num_envs: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def item_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def stride(self) -> int:
        """Bytes from one slot to the next (aligned to a cache line)."""
        return max(_ALIGN, -(-self.item_bytes // _ALIGN) * _ALIGN)

    @property
    def total_bytes(self) -> int:
        return self.num_envs * SLOTS_PER_ENV * self.stride


@dataclass
class SlotHandle:
    """What a worker needs to map the slots (picklable only while spawning a worker)."""

    layout: SlotLayout
    kind: SlotKind
    fd: _InheritedFd | int | None = None  # an int once unpickled in the worker
    name: str | None = None


def _map_shm(shm: shared_memory.SharedMemory, size: int) -> tuple[Any, mmap.mmap | None]:
    """Map a segment with an mmap of our own and close SharedMemory's mapping.

    Numpy views of ``shm.buf`` would make ``SharedMemory.close`` (and its
    ``__del__``) raise BufferError while a caller still holds an observation; an
    mmap of our own is simply freed when its last view goes.
    """
    fd = getattr(shm, "_fd", -1)
    if fd < 0:  # pragma: no cover - not POSIX
        return shm.buf, None
    mapping = mmap.mmap(fd, size)
    shm.close()
    return mapping, mapping


class ObservationSlots:
    """`views[env_id][slot]` is the numpy array of one slot."""

    def __init__(
        self,
        layout: SlotLayout,
        buffer: Any,
        kind: SlotKind,
        *,
        owner: bool,
        fd: int | None = None,
        shm: shared_memory.SharedMemory | None = None,
        mapping: mmap.mmap | None = None,
    ) -> None:
        self.layout = layout
        self.kind: SlotKind = kind
        self._owner = owner
        self._fd = fd
        self._shm = shm
        self._name = shm.name if shm is not None else None
        self._mapping = mapping
        self._closed = False
        n = layout.num_envs * SLOTS_PER_ENV
        stride = layout.stride
        base = np.frombuffer(buffer, dtype=np.uint8, count=n * stride)
        #: views[env_id][slot]: writeable arrays (for the env host).
        self.views: list[list[npt.NDArray[Any]]] = []
        #: read_views[env_id][slot]: the same memory, read-only (handed to the caller).
        self.read_views: list[list[npt.NDArray[Any]]] = []
        for env_id in range(layout.num_envs):
            row, read_row = [], []
            for slot in range(SLOTS_PER_ENV):
                start = (env_id * SLOTS_PER_ENV + slot) * stride
                view = base[start : start + layout.item_bytes].view(layout.dtype)
                view = view.reshape(layout.shape)
                read_view = view.view()
                read_view.flags.writeable = False
                row.append(view)
                read_row.append(read_view)
            self.views.append(row)
            self.read_views.append(read_row)

    # -- creation ---------------------------------------------------------------

    @classmethod
    def create(cls, layout: SlotLayout, kind: SlotKind | None = None) -> ObservationSlots:
        """Allocate slots (the caller owns them and must `close` them)."""
        kind = kind or default_slot_kind()
        size = max(layout.total_bytes, 1)
        if kind == "local":
            return cls(layout, bytearray(size), kind, owner=True)
        if kind == "memfd":
            fd = os.memfd_create("oakemu-obs", os.MFD_CLOEXEC)
            try:
                os.ftruncate(fd, size)
                mapping = mmap.mmap(fd, size)
            except BaseException:
                os.close(fd)
                raise
            return cls(layout, mapping, kind, owner=True, fd=fd, mapping=mapping)
        shm = shared_memory.SharedMemory(
            create=True, size=size, name=f"oakemu_{os.urandom(6).hex()}"
        )
        buffer, shm_map = _map_shm(shm, size)
        return cls(layout, buffer, kind, owner=True, shm=shm, mapping=shm_map)

    def handle(self) -> SlotHandle:
        """A picklable description for `attach` in a worker."""
        if self.kind == "memfd":
            assert self._fd is not None
            return SlotHandle(self.layout, "memfd", fd=_InheritedFd(self._fd))
        if self.kind == "posix":
            assert self._name is not None
            return SlotHandle(self.layout, "posix", name=self._name)
        raise ValueError("local observation slots cannot be shared with another process")

    @classmethod
    def attach(cls, handle: SlotHandle) -> ObservationSlots:
        """Map slots created by another process (for writing)."""
        size = max(handle.layout.total_bytes, 1)
        if handle.kind == "memfd":
            assert handle.fd is not None
            fd = handle.fd if isinstance(handle.fd, int) else handle.fd.fd
            mapping = mmap.mmap(fd, size)
            os.close(fd)
            return cls(handle.layout, mapping, "memfd", owner=False, mapping=mapping)
        assert handle.name is not None
        # Attaching registers the name with the (shared) resource tracker again; that
        # is a no-op there, and the parent's unlink unregisters it.
        shm = shared_memory.SharedMemory(name=handle.name)
        buffer, shm_map = _map_shm(shm, size)
        return cls(handle.layout, buffer, "posix", owner=False, shm=shm, mapping=shm_map)

    @property
    def name(self) -> str | None:
        """The /dev/shm name of a ``posix`` buffer, else None."""
        return self._name

    # -- release -----------------------------------------------------------------

    def close(self) -> None:
        """Unmap (and, for the owner, free) the buffer. Idempotent.

        Views still held elsewhere keep the mapping alive until they are garbage
        collected; the name (``posix``) is removed at once.
        """
        if self._closed:
            return
        self._closed = True
        self.views = []
        self.read_views = []
        if self._shm is not None:
            if self._owner:
                with contextlib.suppress(FileNotFoundError):
                    self._shm.unlink()
            with contextlib.suppress(BufferError):
                self._shm.close()
            self._shm = None
        if self._mapping is not None:
            with contextlib.suppress(BufferError):
                self._mapping.close()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
