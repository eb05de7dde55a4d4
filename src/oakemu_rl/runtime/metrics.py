"""Metrics sinks: where scalars go (TensorBoard, the console, memory).

Scalar names are shared by every algorithm, for example `episode/return`,
`episode/length`, `episode/wins`, `train/loss`, `train/mean_q`, `train/epsilon`,
`perf/env_steps_per_s`, `perf/updates_per_s`, `replay/size`, `queue/result_depth`
and `queue/replay_depth`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rich.console import Console


@runtime_checkable
class MetricsSink(Protocol):
    """Receives scalars; must be safe to call from several threads."""

    def scalar(self, name: str, value: float, step: int) -> None:
        """Record one scalar at an environment step."""

    def flush(self) -> None:
        """Write out anything buffered."""

    def close(self) -> None:
        """Flush and release resources."""


class NullSink:
    """Discards everything."""

    def scalar(self, name: str, value: float, step: int) -> None:
        return None

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None


class MemorySink:
    """Keeps every scalar in memory, and the latest value of each name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.history: dict[str, list[tuple[int, float]]] = {}
        self.latest: dict[str, float] = {}

    def scalar(self, name: str, value: float, step: int) -> None:
        with self._lock:
            self.history.setdefault(name, []).append((step, float(value)))
            self.latest[name] = float(value)

    def get(self, name: str, default: float | None = None) -> float | None:
        with self._lock:
            return self.latest.get(name, default)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self.latest)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None


@runtime_checkable
class VideoSink(Protocol):
    """Also receives short videos (animated GIFs)."""

    def video(self, name: str, gif: bytes, width: int, height: int, step: int) -> None:
        """Record one GIF at an environment step."""


class TensorBoardSink:
    """Writes scalars as TensorBoard event files under `log_dir`, and videos (animated
    GIFs, shown in TensorBoard's Images tab, as `add_video` writes them)."""

    def __init__(self, log_dir: str | Path, flush_secs: int = 10) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self._lock = threading.Lock()
        self._writer = SummaryWriter(log_dir=str(self.log_dir), flush_secs=flush_secs)
        self._closed = False

    def scalar(self, name: str, value: float, step: int) -> None:
        with self._lock:
            if not self._closed:
                self._writer.add_scalar(name, float(value), global_step=int(step))

    def video(self, name: str, gif: bytes, width: int, height: int, step: int) -> None:
        # add_video would encode the frames with moviepy 1.x (gone in moviepy 2): the same
        # summary, an image holding a GIF, is written from the GIF made here.
        from tensorboard.compat.proto.summary_pb2 import Summary

        image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif)
        summary = Summary(value=[Summary.Value(tag=name, image=image)])
        with self._lock:
            # SummaryWriter.file_writer: typed None by torch, an EventFileWriter while open.
            writer: Any = getattr(self._writer, "file_writer", None)
            if not self._closed and writer is not None:
                writer.add_summary(summary, int(step))

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._writer.flush()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._writer.close()
                self._closed = True


class MultiSink:
    """Sends every scalar to several sinks."""

    def __init__(self, sinks: Iterable[MetricsSink]) -> None:
        self.sinks = list(sinks)

    def scalar(self, name: str, value: float, step: int) -> None:
        for sink in self.sinks:
            sink.scalar(name, value, step)

    def video(self, name: str, gif: bytes, width: int, height: int, step: int) -> None:
        for sink in self.sinks:
            if isinstance(sink, VideoSink):
                sink.video(name, gif, width, height, step)

    def flush(self) -> None:
        for sink in self.sinks:
            sink.flush()

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


HEADLINE: tuple[tuple[str, str, str], ...] = (
    # (scalar name, label, format)
    ("episode/return_mean", "return", "{:.2f}"),
    ("episode/score_mean", "score", "{:.1f}"),
    ("episode/wins", "wins", "{:.0f}"),
    ("episode/losses", "losses", "{:.0f}"),
    ("train/epsilon", "eps", "{:.3f}"),
    ("train/loss", "loss", "{:.4f}"),
    ("train/mean_q", "Q", "{:.2f}"),
    ("perf/env_steps_per_s", "steps/s", "{:.0f}"),
    ("perf/updates_per_s", "upd/s", "{:.0f}"),
    ("replay/size", "replay", "{:.0f}"),
    ("eval/mean_return", "eval", "{:.2f}"),
)


class ConsoleSink:
    """A progress display with the headline figures.

    On a terminal it is a live rich progress bar; otherwise (logs, CI) it prints
    one line every `interval` seconds. Scalars are only remembered here; the
    display is refreshed by `update(step)`. With `time_limit_s` (a run budgeted in
    wall-clock time) the bar shows whichever budget is further spent, steps or minutes.
    """

    def __init__(
        self,
        total_steps: int,
        *,
        interval: float = 10.0,
        console: Console | None = None,
        live: bool | None = None,
        initial_step: int = 0,
        time_limit_s: float | None = None,
    ) -> None:
        self.total_steps = total_steps
        self.time_limit_s = time_limit_s
        self._started = time.monotonic()
        self.interval = interval
        self.console = console or Console(stderr=False)
        self._latest: dict[str, float] = {}
        self._lock = threading.Lock()
        self._last_print = 0.0
        self._live = self.console.is_terminal if live is None else live
        self._progress: Any = None
        self._task: Any = None
        self._display: Any = None
        self._text: Any = None
        if self._live:
            from rich.console import Group
            from rich.live import Live
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
            from rich.text import Text

            self._progress = Progress(
                TextColumn("[bold]{task.fields[done]}"),
                BarColumn(bar_width=30),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._task = self._progress.add_task(
                "", total=1.0, completed=self._fraction(initial_step), done=self._done(initial_step)
            )
            self._text = Text("")
            self._display = Live(
                Group(self._progress, self._text), console=self.console, refresh_per_second=4
            )
            self._display.start()

    def _fraction(self, step: int) -> float:
        used = step / max(1, self.total_steps)
        if self.time_limit_s is not None:
            used = max(used, (time.monotonic() - self._started) / self.time_limit_s)
        return min(1.0, used)

    def _done(self, step: int) -> str:
        """'1,234/60,000 steps', or with a time limit '1,234 steps, 2.5/30 min'."""
        if self.time_limit_s is None:
            return f"{step:>9,}/{self.total_steps:,} steps"
        minutes = (time.monotonic() - self._started) / 60
        return f"{step:>9,} steps, {minutes:.1f}/{self.time_limit_s / 60:g} min"

    def scalar(self, name: str, value: float, step: int) -> None:
        with self._lock:
            self._latest[name] = float(value)

    def headline(self) -> str:
        """The headline figures as one line."""
        with self._lock:
            latest = dict(self._latest)
        parts = []
        for name, label, fmt in HEADLINE:
            if name in latest:
                parts.append(f"{label} {fmt.format(latest[name])}")
        return "  ".join(parts)

    def update(self, step: int, *, force: bool = False) -> None:
        """Refresh the display at `step`."""
        if self._progress is not None:
            self._progress.update(self._task, completed=self._fraction(step), done=self._done(step))
            self._text.plain = self.headline()
            return
        now = time.monotonic()
        if force or now - self._last_print >= self.interval:
            self._last_print = now
            print(f"step {self._done(step).strip()}  {self.headline()}", flush=True)

    def message(self, text: str) -> None:
        """Print a line above the progress display."""
        if self._progress is not None:
            self._progress.console.print(text)
        else:
            print(text, file=sys.stdout, flush=True)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        if self._display is not None:
            self._display.stop()
            self._display = None
            self._progress = None


def log_scalars(sink: MetricsSink, values: Mapping[str, float], step: int) -> None:
    """Record several scalars at one step."""
    for name, value in values.items():
        sink.scalar(name, value, step)
