"""The backends of OakEmuMultiEnv, one class each behind one interface (`base.EnvPool`):
`inline.InlinePool`, `process.ProcessPool` and `ray_pool.RayPool` (imported only when
asked for, since Ray is an optional extra)."""

from __future__ import annotations

import importlib.util

RAY_INSTALL = "pip install 'oakemu-rl[ray]'"


class RayNotInstalledError(ImportError):
    """The ray backend was asked for, and Ray is not installed."""


def require_ray() -> None:
    """Raise RayNotInstalledError, saying how to install Ray, when it is missing."""
    if importlib.util.find_spec("ray") is None:
        raise RayNotInstalledError(
            f"the ray backend needs Ray, which is not installed; install it with: {RAY_INSTALL}"
        )


def check_ray_address(text: str) -> str:
    """`text` when it is 'auto' or HOST:PORT (of a Ray head node); else ValueError."""
    if text != "auto":
        host, colon, port = text.rpartition(":")
        if not (colon and host and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"expected 'auto' or HOST:PORT of a Ray head node, not {text!r}")
    return text
