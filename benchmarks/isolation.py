"""Each benchmark contender runs in a fresh process of its own."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_isolated(run: Callable[..., T], *args: Any) -> T:
    """`run(*args)` in a fresh (spawned) process: no contender inherits another's process
    settings (torch threads, allocator tuning, warmed caches)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(run, *args).result()
