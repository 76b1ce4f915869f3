"""The detectors' statistics against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from posttrain.eval.hacking_stats import (
    bootstrap_slope_ci,
    correlation_shift_p,
    distinct_n,
    ranks,
    slope,
    spearman,
    unique_ratio,
    wilson_interval,
)


def test_wilson_interval_by_hand() -> None:
    # 10/100, z = 1.96: centre (0.1 + 0.019208) / 1.038416 = 0.114798,
    # half-width 1.96 * sqrt(0.0009 + 0.00009604) / 1.038416 = 0.059571
    assert wilson_interval(10, 100) == pytest.approx((0.055227, 0.174369), abs=1e-5)
    # 0/20: centre = half-width = 0.09604 / 1.19208 = 0.080565; the low end is exactly 0
    assert wilson_interval(0, 20) == pytest.approx((0.0, 0.161130), abs=1e-5)
    assert wilson_interval(20, 20)[1] == 1.0
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_slope_and_its_bootstrap_interval() -> None:
    xs = [0, 1, 2, 3, 4]
    assert slope(xs, [1, 3, 5, 7, 9]) == pytest.approx(2.0)
    assert bootstrap_slope_ci(xs, [1, 3, 5, 7, 9]) == pytest.approx((2.0, 2.0))  # every resample lies on the line
    low, high = bootstrap_slope_ci(list(range(40)), [i % 2 for i in range(40)])
    assert low < 0 < high  # no trend: the interval straddles zero
    assert math.isnan(slope([1, 1], [0, 1])) and all(math.isnan(x) for x in bootstrap_slope_ci([1, 1, 1], [0, 1, 2]))


def test_spearman_with_ties_by_hand() -> None:
    assert list(ranks([10, 20, 20, 30])) == [1.0, 2.5, 2.5, 4.0]
    # ranks x = 1, 2.5, 2.5, 4 and y = 1, 2, 3, 4: sum dx*dy = 4.5, sum dx^2 = 4.5, sum dy^2 = 5
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_fisher_z_p_value_by_hand() -> None:
    # z = atanh(0.5) / sqrt(1/47 + 1/47) = 0.549306 / 0.206284 = 2.66287; p = erfc(z / sqrt 2) = 0.00775
    assert correlation_shift_p(0.0, 50, 0.5, 50) == pytest.approx(0.00775, abs=1e-4)
    assert correlation_shift_p(0.3, 40, 0.3, 90) == pytest.approx(1.0)
    assert math.isnan(correlation_shift_p(0.1, 3, 0.2, 40))


def test_diversity_measures() -> None:
    assert distinct_n(["a b c", "a b d"]) == 0.75  # bigrams ab, bc, ab, bd: 3 distinct of 4
    assert distinct_n(["a", "a", "b"]) == pytest.approx(2 / 3)  # one-word texts count as one gram each
    assert unique_ratio(["A  b", "a b", "c"]) == pytest.approx(2 / 3)
    assert math.isnan(unique_ratio([])) and math.isnan(distinct_n([]))
