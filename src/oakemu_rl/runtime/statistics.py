"""Confidence intervals for evaluation results, and aggregates over games (IQM with a
stratified bootstrap interval, as rliable reports them)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

import numpy as np

# Two-sided 95% critical values of Student's t for 1-30 degrees of freedom.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_critical_95(degrees_of_freedom: int) -> float:
    """Student's t quantile for a two-sided 95% interval (a table to 30 degrees of
    freedom, then the Cornish-Fisher expansion, within 0.001 of the exact value)."""
    if degrees_of_freedom < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {degrees_of_freedom}")
    if degrees_of_freedom <= len(_T95):
        return _T95[degrees_of_freedom - 1]
    z = NormalDist().inv_cdf(0.975)
    n = degrees_of_freedom
    return z + (z**3 + z) / (4 * n) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)


def mean_confidence_interval(values: Sequence[float]) -> tuple[float, float]:
    """The 95% confidence interval of the mean of `values` (Student's t). With fewer than
    two values there is no spread to measure: the interval is the mean itself (NaN when
    there are none)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = math.fsum(values) / n
    if n < 2:
        return mean, mean
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_critical_95(n - 1) * math.sqrt(variance / n)
    return mean - half, mean + half


def interquartile_mean(values: Sequence[float]) -> float:
    """The mean of the middle half of `values` (rliable's IQM: the 25% lowest and highest
    are dropped, with fractional weights where the quartiles fall between values)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan
    low, high = 0.25 * n, 0.75 * n
    total = 0.0
    for i, value in enumerate(ordered):
        weight = max(0.0, min(i + 1, high) - max(i, low))  # the part of [i, i+1) kept
        total += weight * value
    return total / (high - low)


def stratified_bootstrap_ci(
    scores: dict[str, Sequence[float]],
    statistic: Callable[[Sequence[float]], float] = interquartile_mean,
    *,
    repetitions: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """`statistic` over every run of every game, with a 95% percentile bootstrap interval
    that resamples runs within each game (rliable's stratified bootstrap: each game keeps
    its number of runs). Returns (point estimate, low, high)."""
    if not scores or any(len(runs) == 0 for runs in scores.values()):
        raise ValueError("every game needs at least one run")
    rng = np.random.default_rng(seed)
    pooled = [float(v) for runs in scores.values() for v in runs]
    arrays = [np.asarray(runs, dtype=np.float64) for runs in scores.values()]
    estimates = np.empty(repetitions)
    for r in range(repetitions):
        sample = [a[rng.integers(0, len(a), len(a))] for a in arrays]
        estimates[r] = statistic(np.concatenate(sample).tolist())
    low, high = np.percentile(estimates, [2.5, 97.5])
    return statistic(pooled), float(low), float(high)
