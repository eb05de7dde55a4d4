"""A progress bar for long work outside training (replaying demonstrations, searching)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress_bar"]


@contextmanager
def progress_bar(
    total: int, description: str, enabled: bool = True
) -> Iterator[Callable[[int], None]]:
    """Yields `advance(n)`; shows a rich progress bar on a terminal when `enabled`
    (elsewhere, e.g. in logs and CI, nothing is drawn)."""
    if not enabled or not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        transient=True,
    ) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)
