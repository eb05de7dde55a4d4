"""Evaluation you can trust: a confidence interval and a median with every result, and the
best checkpoint by the interval's low end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from oakemu_rl.runtime.statistics import (
    interquartile_mean,
    mean_confidence_interval,
    stratified_bootstrap_ci,
    t_critical_95,
)
from oakemu_rl.runtime.tester import is_better, summarise


def test_t_critical_values_match_the_textbook() -> None:
    assert t_critical_95(1) == pytest.approx(12.706)
    assert t_critical_95(9) == pytest.approx(2.262)
    assert t_critical_95(60) == pytest.approx(2.000, abs=0.001)
    assert t_critical_95(120) == pytest.approx(1.980, abs=0.001)
    assert t_critical_95(10_000) == pytest.approx(1.960, abs=0.001)


def test_the_interval_covers_the_true_mean_about_95_times_in_100() -> None:
    rng = np.random.default_rng(0)
    trials, covered = 4000, 0
    for _ in range(trials):
        low, high = mean_confidence_interval(list(rng.normal(5.0, 3.0, size=10)))
        covered += low <= 5.0 <= high
    assert 0.935 <= covered / trials <= 0.965


def test_degenerate_samples() -> None:
    assert mean_confidence_interval([3.0]) == (3.0, 3.0)
    assert mean_confidence_interval([2.0, 2.0, 2.0]) == (2.0, 2.0)
    low, high = mean_confidence_interval([])
    assert math.isnan(low) and math.isnan(high)


def test_a_result_carries_its_interval_and_median_and_ranks_by_the_low_end() -> None:
    steady = summarise(
        [(10.0, 10.0, 100, "win", 0)] * 5 + [(12.0, 12.0, 100, "win", 0)] * 5, 1, "greedy"
    )
    assert steady.median_return == 11.0
    assert steady.ci95_low < 11.0 < steady.ci95_high
    lucky = summarise([(40.0, 40.0, 100, "win", 0), (-10.0, -10.0, 100, "loss", 3)], 2, "greedy")
    assert lucky.mean_return > steady.mean_return  # a higher mean over two episodes...
    assert not is_better(lucky, steady)  # ...is not a better agent
    assert is_better(steady, lucky) and is_better(steady, None)
    assert "95% CI" in steady.interval and "median 11.00" in steady.interval


def test_a_clean_win_is_a_win_with_no_life_lost() -> None:
    result = summarise(
        [
            (90.0, 30.0, 400, "win", 0),
            (80.0, 30.0, 420, "win", 2),  # won, but lost two lives on the way
            (10.0, 3.0, 200, "loss", 5),
            (20.0, 6.0, 500, "truncated", 0),  # no life lost, but not won
        ],
        1,
        "greedy",
    )
    assert result.win_rate == 0.5
    assert result.clean_win_rate == 0.25
    assert result.lives_lost == [0, 2, 5, 0]
    assert "lives_lost" not in result.to_dict() and "lives_lost" in result.to_dict(details=True)


def test_interquartile_mean_drops_the_outer_quarters() -> None:
    assert interquartile_mean([1, 2, 3, 4]) == 2.5  # the middle two
    assert interquartile_mean([0, 0, 0, 0, 100, 100, 100, 1000]) == 50.0
    # Quartiles between values weigh them fractionally: of 1..6 the middle half is 3 values'
    # worth, 2 at half weight, 3 and 4, and 5 at half weight.
    assert interquartile_mean([1, 2, 3, 4, 5, 6]) == pytest.approx((1 + 3 + 4 + 2.5) / 3)
    assert interquartile_mean([7]) == 7
    assert math.isnan(interquartile_mean([]))


def test_stratified_bootstrap_covers_the_point_and_resamples_within_games() -> None:
    scores = {"a": [0.1, 0.2, 0.3], "b": [0.9, 1.0, 1.1], "c": [0.5, 0.5, 0.5]}
    point, low, high = stratified_bootstrap_ci(scores, repetitions=500, seed=1)
    assert point == pytest.approx(interquartile_mean([v for r in scores.values() for v in r]))
    assert low <= point <= high
    assert low >= 0.1 and high <= 1.1
    # A game whose runs all agree adds no spread: one game of equal runs has no interval.
    assert stratified_bootstrap_ci({"c": [0.5, 0.5]}, repetitions=50) == (0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="at least one run"):
        stratified_bootstrap_ci({"a": []})
