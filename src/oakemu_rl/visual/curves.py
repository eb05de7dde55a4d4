"""Learning curves from runs' TensorBoard event files.

`plot_runs` draws the training episodes' mean return, mean score and win rate and the
learner's loss, against env steps (top row) and against wall time (bottom row). Runs
whose configurations differ only in the seed form one group: its line is the mean over
the runs, with a band from the lowest to the highest run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

PANELS = (
    ("episode/return_mean", "return (training episodes, mean)"),
    ("episode/score_mean", "score (training episodes, mean)"),
    ("episode/win_rate", "win rate (training episodes)"),
    ("train/loss", "loss"),
)
GRID_POINTS = 200


class PlotError(ValueError):
    """A run directory that cannot be plotted (the message names it)."""


@dataclass
class Series:
    """One scalar of one run: env steps, seconds since the run's first event, values."""

    steps: npt.NDArray[np.float64]
    seconds: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]


@dataclass
class RunCurves:
    run_dir: Path
    label: str
    group_key: str
    series: dict[str, Series] = field(default_factory=dict)


def read_run(run_dir: str | Path) -> RunCurves:
    """The scalars `PANELS` plots, from a run directory's `tb/` event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = Path(run_dir)
    tb = run_dir / "tb"
    if not tb.is_dir():
        raise PlotError(f"{run_dir}: no TensorBoard events (tb/); was logging.tensorboard off?")
    config_path = run_dir / "config.yaml"
    config: dict[str, Any] = {}
    if config_path.is_file():
        loaded = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        config = loaded if isinstance(loaded, dict) else {}
    events = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags().get("scalars", []))
    series = {}
    start = None
    for tag, _ in PANELS:
        if tag not in tags:
            continue
        scalars = events.Scalars(tag)
        first = min(e.wall_time for e in scalars)
        start = first if start is None else min(start, first)
        series[tag] = (scalars, first)
    if not series:
        raise PlotError(f"{run_dir}: its events hold none of {', '.join(t for t, _ in PANELS)}")
    curves = RunCurves(run_dir, _label(config, run_dir), _group_key(config, run_dir))
    for tag, (scalars, _) in series.items():
        curves.series[tag] = Series(
            np.array([e.step for e in scalars], dtype=np.float64),
            np.array([e.wall_time - (start or 0.0) for e in scalars], dtype=np.float64),
            np.array([e.value for e in scalars], dtype=np.float64),
        )
    return curves


def _label(config: dict[str, Any], run_dir: Path) -> str:
    if "algo" in config and "game" in config:
        return f"{config['algo']} {config['game']}"
    return run_dir.name


def _group_key(config: dict[str, Any], run_dir: Path) -> str:
    """Runs with the same key differ at most in their seed (and run name)."""
    if not config:
        return str(run_dir)
    same = {k: v for k, v in config.items() if k not in ("seed", "run_name")}
    return yaml.safe_dump(same, sort_keys=True)


@dataclass
class Group:
    label: str
    runs: list[RunCurves]


def group_runs(runs: list[RunCurves]) -> list[Group]:
    """Runs grouped by configuration; labels made unique where configurations differ."""
    groups: dict[str, Group] = {}
    for run in runs:
        groups.setdefault(run.group_key, Group(run.label, [])).runs.append(run)
    result = list(groups.values())
    labels = [g.label for g in result]
    for group in result:
        if labels.count(group.label) > 1:
            group.label = f"{group.label} ({group.runs[0].run_dir.name})"
        if len(group.runs) > 1:
            group.label += f", {len(group.runs)} seeds"
    return result


Array = npt.NDArray[np.float64]


def _band(runs: list[RunCurves], tag: str, axis: str) -> tuple[Array, Array, Array, Array] | None:
    """(x, mean, low, high) of `tag` over `runs` on a common grid of `axis`."""
    series = [r.series[tag] for r in runs if tag in r.series and len(r.series[tag].values)]
    if not series:
        return None
    xs = [getattr(s, axis) for s in series]
    low_x = max(float(x.min()) for x in xs)
    high_x = min(float(x.max()) for x in xs)
    if high_x <= low_x:  # one point each, or no overlap: plot the first run as it is
        x = xs[0]
        return x, series[0].values, series[0].values, series[0].values
    grid = np.linspace(low_x, high_x, GRID_POINTS)
    stacked = np.stack([np.interp(grid, x, s.values) for x, s in zip(xs, series, strict=True)])
    return grid, stacked.mean(axis=0), stacked.min(axis=0), stacked.max(axis=0)


def plot_runs(run_dirs: list[str | Path], out: str | Path, title: str | None = None) -> list[Group]:
    """Draw the learning curves of `run_dirs` into the image file `out` (PNG, SVG, PDF)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = group_runs([read_run(d) for d in run_dirs])
    figure = Figure(figsize=(4.2 * len(PANELS), 7.0), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, len(PANELS))
    for row, (axis, xlabel) in enumerate((("steps", "env steps"), ("seconds", "wall time (s)"))):
        for col, (tag, name) in enumerate(PANELS):
            ax = axes[row][col]
            for index, group in enumerate(groups):
                band = _band(group.runs, tag, axis)
                if band is None:
                    continue
                x, mean, low, high = band
                colour = f"C{index % 10}"
                ax.plot(x, mean, color=colour, label=group.label, linewidth=1.5)
                if len(group.runs) > 1:
                    ax.fill_between(x, low, high, color=colour, alpha=0.2, linewidth=0)
            ax.set_xlabel(xlabel)
            ax.set_title(name, fontsize=10)
            ax.grid(alpha=0.3)
            if tag == "train/loss":
                ax.set_yscale("symlog", linthresh=1e-3)
    axes[0][0].legend(fontsize=8, loc="best")
    if title:
        figure.suptitle(title)
    figure.savefig(str(out), dpi=100)
    return groups
