"""The error measures of two numeric ratings read their inputs as the correlations do: two sequences of one
length, of which only the pairs where both values are present count."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mheval.stats.correlation import diff_sumstat, mae, paired, rmse

# A judge's and a human's scores on six replies; each side left two of them unscored (None or NaN).
JUDGE = [4, None, 3, math.nan, 5, 2]
HUMAN = [5, 4, None, 1, 3, 2]


@pytest.mark.parametrize("measure", [mae, rmse])
def test_error_measures_refuse_inputs_of_different_lengths(measure) -> None:
    with pytest.raises(ValueError, match=r"differ in length \(3 vs 2\)"):
        measure([1, 2, 3], [1, 2])


def test_per_item_sums_refuse_inputs_of_different_lengths() -> None:
    with pytest.raises(ValueError, match=r"differ in length \(2 vs 1\)"):
        diff_sumstat([1, 2], [1], "bias")


def test_per_item_sums_count_the_pairs_that_paired_keeps() -> None:
    xs, ys = paired(JUDGE, HUMAN)
    assert xs.tolist() == [4.0, 5.0, 2.0] and ys.tolist() == [5.0, 3.0, 2.0]
    stat = diff_sumstat(JUDGE, HUMAN, "bias")
    assert stat.n == xs.size
    # One row per item: whether its pair is complete, then its difference (zero where it is not).
    assert stat.item_stats[:, 0].tolist() == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert stat.item_stats[:, 1].tolist() == [-1.0, 0.0, 0.0, 0.0, 2.0, 0.0]
    totals = stat.item_stats.sum(axis=0)
    assert float(stat.statistic(totals)) == pytest.approx(float(np.mean(xs - ys)), abs=1e-12)


def test_error_measures_use_only_complete_pairs() -> None:
    assert mae(JUDGE, HUMAN).value == pytest.approx((1 + 2 + 0) / 3, abs=1e-12)
    assert rmse(JUDGE, HUMAN).value == pytest.approx(math.sqrt((1 + 4 + 0) / 3), abs=1e-12)
    assert mae(JUDGE, HUMAN).n == 3
