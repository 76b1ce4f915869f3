"""Evaluation statistics against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posttrain.eval.stats import (
    bootstrap_ci,
    mcnemar_p,
    paired,
    paired_mean_of_domains,
    paired_ratio_change,
    verdict,
)


def test_mcnemar_exact_p_by_hand() -> None:
    # 1 task passed only before, 9 only after, 5 both, 5 neither:
    # p = 2 * P(Binomial(10, 1/2) <= 1) = 2 * (1 + 10) / 1024 = 22/1024
    base = [True] * 1 + [False] * 9 + [True] * 5 + [False] * 5
    final = [False] * 1 + [True] * 9 + [True] * 5 + [False] * 5
    assert mcnemar_p(base, final) == pytest.approx(22 / 1024)
    # 2 vs 2 discordant: p = 2 * P(X <= 2; n=4) = 2 * 11/16 > 1, capped at 1
    assert mcnemar_p([True, True, False, False], [False, False, True, True]) == 1.0
    assert mcnemar_p([True, False], [True, False]) == 1.0  # no discordant pair


def test_bootstrap_ci_of_a_constant_is_the_constant_and_brackets_the_mean() -> None:
    assert bootstrap_ci([0.5] * 20) == (0.5, 0.5)
    values = [0.0] * 50 + [1.0] * 50
    low, high = bootstrap_ci(values)
    # standard error of a 50% rate over 100 tasks is 0.05: the 95% interval is about 0.5 +- 0.098
    assert 0.38 < low < 0.42 and 0.58 < high < 0.62
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    assert all(math.isnan(x) for x in bootstrap_ci([]))


def test_paired_comparison_cancels_task_difficulty() -> None:
    # each task's score rises by exactly 0.1 while tasks differ wildly: the paired delta has no spread
    base = list(np.linspace(0.0, 0.8, 40))
    result = paired(base, [b + 0.1 for b in base])
    assert result.delta == pytest.approx(0.1)
    assert (result.ci_low, result.ci_high) == pytest.approx((0.1, 0.1))
    assert result.p_value == pytest.approx(1 / 2000)  # no resample at or below zero: floor 1/R
    assert result.verdict == "improved" and result.n == 40


def test_paired_pass_fail_uses_mcnemar_and_needs_significance() -> None:
    # 3 of 3 tasks go from fail to pass: the bootstrap interval is the point 1.0, but McNemar's
    # p = 2 * (1/8) = 0.25, so this is not called an improvement
    few = paired([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert (few.delta, few.ci_low, few.ci_high, few.p_value) == (1.0, 1.0, 1.0, 0.25)
    assert few.verdict == "no significant change"
    many = paired([0.0] * 30 + [1.0] * 10, [1.0] * 20 + [0.0] * 10 + [1.0] * 10)
    assert many.p_value == pytest.approx(2 * 1 / 2**20)  # 20 discordant, all one way
    assert many.verdict == "improved"
    worse = paired([1.0] * 20 + [0.0] * 20, [0.0] * 40)
    assert worse.verdict == "regressed" and worse.delta == -0.5


def test_verdict_needs_both_interval_and_p() -> None:
    assert verdict(0.01, 0.2, 0.01) == "improved"
    assert verdict(-0.2, -0.01, 0.01) == "regressed"
    assert verdict(-0.01, 0.2, 0.01) == "no significant change"
    assert verdict(0.01, 0.2, 0.2) == "no significant change"


def test_mean_of_domains_weights_domains_equally() -> None:
    # domain A: 100 tasks, +0.25 each; domain B: 4 tasks, -0.25 each -> mean of domains 0, not +0.24
    pairs = [([0.25] * 100, [0.5] * 100), ([0.75] * 4, [0.5] * 4)]
    result = paired_mean_of_domains(pairs)
    assert result.delta == pytest.approx(0.0)
    assert (result.ci_low, result.ci_high) == pytest.approx((0.0, 0.0))
    assert result.verdict == "no significant change" and result.n == 104


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="paired"):
        paired([1.0], [1.0, 0.0])


def test_paired_ratio_change_pools_rates_on_the_same_tasks() -> None:
    # unit denominators: the change is the mean difference, as in `paired_mean_of_domains`
    base, new = [0.0, 1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0, 1.0]
    unit = paired_ratio_change([([(b, 1.0) for b in base], [(n, 1.0) for n in new])])
    reference = paired_mean_of_domains([(base, new)])
    assert unit.delta == pytest.approx(0.4) and (unit.ci_low, unit.ci_high) == (reference.ci_low, reference.ci_high)
    # pooled rates over a changing subset: before 1/4, after 3/4 (a task may lack the metric on one side)
    before = [(1.0, 2.0), (0.0, 2.0), (0.0, 0.0)]
    after = [(1.0, 1.0), (1.0, 2.0), (1.0, 1.0)]
    change = paired_ratio_change([(before, after)])
    assert change.delta == pytest.approx(0.5) and change.n == 3
    assert change.ci_low <= change.delta <= change.ci_high
    # two domains weigh equally; a domain where one side is never defined is left out
    both = paired_ratio_change([(before, after), ([(0.0, 1.0)] * 3, [(1.0, 1.0)] * 3), ([(0.0, 0.0)], [(1.0, 1.0)])])
    assert both.delta == pytest.approx(0.75) and both.n == 6
    assert math.isnan(paired_ratio_change([]).delta)
    with pytest.raises(ValueError, match="paired"):
        paired_ratio_change([([(1.0, 1.0)], [])])


def test_paired_ratio_change_finds_a_consistent_gain() -> None:
    rng = np.random.default_rng(0)
    errored = rng.integers(1, 4, size=200).astype(float)
    before = [(float(rng.binomial(int(n), 0.2)), n) for n in errored]
    after = [(float(rng.binomial(int(n), 0.4)), n) for n in errored]
    change = paired_ratio_change([(before, after)])
    assert change.ci_low > 0.1 and change.p_value < 0.01
    flat = paired_ratio_change([(before, before)])
    assert flat.delta == 0.0 and flat.ci_low == flat.ci_high == 0.0
