"""Self-consistency over a units x repeats matrix: hand computations and reference packages."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from mheval.stats.consistency import FLEISS, ICC_A1, repeat_consistency, unit_consistency


def test_labels_by_hand() -> None:
    # Unit u2 is seen once: counted as single, left out of everything else.
    m = pd.DataFrame(
        [["a", "a", "b"], ["b", "b", "b"], ["a", None, None], [None, "c", "c"]],
        index=["u0", "u1", "u2", "u3"],
    )
    c = repeat_consistency(m, n_boot=0)
    assert (c.units, c.single, c.repeats, c.identical) == (3, 1, 3, 2)
    assert c.statistic == FLEISS and c.mean_std is None
    assert c.identical_share == pytest.approx(2 / 3)
    assert c.modal_share == pytest.approx((2 / 3 + 1 + 1) / 3)
    # Fleiss by hand. Agreeing pairs per unit: u0 (a,a,b) 1 of 3; u1 3 of 3; u3 1 of 1, so P = 7/9.
    # Category shares over the 8 ratings kept: a 2, b 4, c 2, so Pe = (1/4)^2 + (1/2)^2 + (1/4)^2 = 3/8.
    assert c.agreement.value == pytest.approx((7 / 9 - 3 / 8) / (1 - 3 / 8))
    assert c.agreement.n == 3


def test_numbers_by_hand() -> None:
    m = np.array([[1, 2, np.nan], [3, 3, 3], [5, 4, 4]], dtype=float)
    c = repeat_consistency(m)
    assert c.statistic == ICC_A1 and (c.units, c.single, c.identical) == (3, 0, 1)
    assert c.mean_std == pytest.approx((np.std([1, 2], ddof=1) + 0 + np.std([5, 4, 4], ddof=1)) / 3)
    # ICC(A,1) over the two complete units [3,3,3] and [5,4,4] (n=2, k=3), grand mean 11/3:
    # MSR = 3 * 2 * (2/3)^2 / 1 = 8/3; MSC = 2 * ((1/3)^2 + 2 * (1/6)^2) / 2 = 1/6;
    # SSE = SST - SSR - SSC = 10/3 - 8/3 - 1/3 = 1/3, MSE = (1/3) / 2 = 1/6.
    msr, msc, mse, n, k = 8 / 3, 1 / 6, 1 / 6, 2, 3
    expected = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
    assert c.agreement.value == pytest.approx(expected) == pytest.approx(5 / 6)
    assert c.agreement.n == 2 and "1 item(s) with a missing rating" in (c.agreement.note or "")


def test_agrees_with_statsmodels_and_pingouin() -> None:
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 3, size=(40, 3))
    codes[:20, 1] = codes[:20, 0]
    labels = np.array(["no", "maybe", "yes"], dtype=object)[codes]
    c = repeat_consistency(labels, n_boot=0)
    assert c.agreement.value == pytest.approx(sm_fleiss(aggregate_raters(codes)[0]))

    truth = rng.normal(3, 1, 30)
    scores = np.column_stack([truth + rng.normal(0, 0.5, 30) for _ in range(3)])
    c = repeat_consistency(scores)
    long = pd.DataFrame(
        [(i, r, scores[i, r]) for i in range(30) for r in range(3)], columns=["unit", "repeat", "score"]
    )
    ref = pg.intraclass_corr(long, targets="unit", raters="repeat", ratings="score").set_index("Type")
    assert c.agreement.value == pytest.approx(ref.loc["ICC(A,1)", "ICC"])


def test_binary_scores_get_kappa_and_a_standard_deviation() -> None:
    m = pd.DataFrame([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    c = repeat_consistency(m, categorical=True, n_boot=0)
    assert c.statistic == FLEISS and c.mean_std == pytest.approx(np.std([0, 1], ddof=1) / 2)
    # Agreeing pairs: 0, 1, 1, 0 so P = 1/2; shares 1/2 each so Pe = 1/2: kappa 0.
    assert c.agreement.value == pytest.approx(0.0)


def test_unit_rows_and_ties_to_the_earliest_repeat() -> None:
    m = pd.DataFrame([[2.0, 4.0], [None, None], [3.0, None]], index=[("c", "m"), ("d", "m"), ("e", "m")])
    rows = unit_consistency(m)
    assert list(rows.index) == [("c", "m"), ("e", "m")]  # the unit with no value has no row
    first = rows.loc[[("c", "m")]].iloc[0]
    assert first["modal"] == 2.0 and first["modal_share"] == 0.5 and not first["identical"]
    assert (first["mean"], first["min"], first["max"]) == (3.0, 2.0, 4.0)
    assert math.isnan(rows.loc[[("e", "m")]].iloc[0]["std"])


def test_nothing_repeated_is_undefined_not_an_error() -> None:
    c = repeat_consistency(pd.DataFrame([["a", None], [None, "b"]]), n_boot=0)
    assert (c.units, c.single, c.identical_share, c.modal_share) == (0, 2, None, None)
    assert c.agreement.value is None and c.agreement.note
