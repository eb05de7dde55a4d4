"""The backends of OakEmuMultiEnv, one class each behind one interface (`base.EnvPool`):
`inline.InlinePool`, `process.ProcessPool` and `ray_pool.RayPool` (imported only when
asked for, since Ray is an optional extra)."""

from __future__ import annotations

import importlib.util

RAY_INSTALL = "pip install 'oakemu-rl[ray]'"


def require_ray() -> None:
    """Raise a clear ImportError, saying how to install Ray, when it is missing."""
    if importlib.util.find_spec("ray") is None:
        raise ImportError(
            f"the ray backend needs Ray, which is not installed; install it with: {RAY_INSTALL}"
        )
