"""Wilson and bootstrap intervals, correlations, errors, bias, concordance and Bland-Altman."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from mheval.stats import (
    bias,
    bland_altman,
    bootstrap_mean_ci,
    lin_ccc,
    mae,
    pearson,
    rmse,
    spearman,
    t_mean_ci,
    wilson,
    within,
)
from mheval.stats.intervals import bootstrap_sums

TOL = 1e-9


def _pair(seed: int, n: int = 60, missing: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 0.6 * x + rng.normal(size=n) * 0.8 + 0.3
    x[rng.random(n) < missing] = np.nan
    y[rng.random(n) < missing] = np.nan
    return x, y


def _complete(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


# --------------------------------------------------------------------------- rates and means


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (95, 190), (1, 1)])
def test_wilson_matches_statsmodels(k: int, n: int) -> None:
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    est = wilson(k, n)
    assert est.value == pytest.approx(k / n)
    assert est.ci_low == pytest.approx(lo, abs=1e-12)
    assert est.ci_high == pytest.approx(hi, abs=1e-12)


def test_wilson_edge_cases() -> None:
    empty = wilson(0, 0)
    assert empty.value is None and empty.note
    with pytest.raises(ValueError):
        wilson(5, 3)
    with pytest.raises(ValueError, match="confidence"):
        wilson(1, 2, confidence=1.5)


def test_bootstrap_sums_equal_explicit_resampling() -> None:
    rng = np.random.default_rng(0)
    S = rng.normal(size=(37, 3))
    fast = bootstrap_sums(S, 250, seed=5)
    idx = np.random.default_rng(5).integers(0, 37, size=(250, 37))
    slow = np.stack([S[rows].sum(axis=0) for rows in idx])
    np.testing.assert_allclose(fast, slow, atol=1e-10)


def test_bootstrap_sums_in_blocks_for_large_n() -> None:
    # Large n forces several blocks; replicates must still be valid resamples (weights sum to n).
    n = 50_000
    ones = np.ones((n, 1))
    sums = bootstrap_sums(ones, 60, seed=1)
    assert sums.shape == (60, 1)
    assert np.all(sums == n)


def test_bootstrap_mean_ci() -> None:
    x = [1.0, 2.0, None, 4.0, np.nan, 3.0, 5.0, 2.5]
    a = bootstrap_mean_ci(x, n_boot=2000, seed=3)
    assert a == bootstrap_mean_ci(x, n_boot=2000, seed=3)
    assert a.value == pytest.approx(np.mean([1, 2, 4, 3, 5, 2.5]))
    assert a.n == 6
    assert a.ci_low < a.value < a.ci_high
    vals = np.array([1, 2, 4, 3, 5, 2.5])
    idx = np.random.default_rng(3).integers(0, 6, size=(2000, 6))
    lo, hi = np.quantile(vals[idx].mean(axis=1), [0.025, 0.975])
    assert (a.ci_low, a.ci_high) == pytest.approx((lo, hi), abs=1e-12)
    assert bootstrap_mean_ci([None, np.nan]).value is None
    single = bootstrap_mean_ci([4.0])
    assert single.value == 4.0 and single.ci_low is None and single.note
    with pytest.raises(ValueError, match="numbers"):
        bootstrap_mean_ci(["a", "b"])


def test_t_mean_ci_matches_scipy() -> None:
    x = np.array([0.2, -0.4, 1.1, 0.7, 0.0, 0.5])
    lo, hi = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    est = t_mean_ci(x)
    assert (est.ci_low, est.ci_high) == pytest.approx((lo, hi), abs=TOL)
    assert est.p_value == pytest.approx(sps.ttest_1samp(x, 0).pvalue, abs=TOL)


# --------------------------------------------------------------------------- correlations


@pytest.mark.parametrize("seed", range(4))
def test_pearson_matches_scipy_value_interval_and_p(seed: int) -> None:
    x, y = _pair(seed)
    xs, ys = _complete(x, y)
    ref = sps.pearsonr(xs, ys)
    ci = ref.confidence_interval()
    est = pearson(x, y)
    assert est.value == pytest.approx(ref.statistic, abs=TOL)
    assert est.ci_low == pytest.approx(ci.low, abs=TOL)
    assert est.ci_high == pytest.approx(ci.high, abs=TOL)
    assert est.p_value == pytest.approx(ref.pvalue, rel=1e-7, abs=1e-300)
    assert est.n == xs.size


@pytest.mark.parametrize("seed", range(4))
def test_spearman_matches_scipy_value_and_p(seed: int) -> None:
    x, y = _pair(seed)
    x = np.round(x * 2) / 2  # ties
    xs, ys = _complete(x, y)
    ref = sps.spearmanr(xs, ys)
    est = spearman(x, y)
    assert est.value == pytest.approx(ref.statistic, abs=TOL)
    assert est.p_value == pytest.approx(ref.pvalue, rel=1e-7, abs=1e-300)


def test_spearman_interval_is_wider_than_plain_fisher_z() -> None:
    # Bonett-Wright inflates the Fisher z variance by (1 + rho^2 / 2): the interval is never narrower.
    x, y = _pair(1, n=80, missing=0)
    est = spearman(x, y)
    r, n = est.value, est.n
    half = 1.959963984540054 * math.sqrt(1 / (n - 3))
    plain = (math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half))
    assert est.ci_low < plain[0] and est.ci_high > plain[1]
    bw = 1.959963984540054 * math.sqrt((1 + r * r / 2) / (n - 3))
    assert est.ci_low == pytest.approx(math.tanh(math.atanh(r) - bw), abs=TOL)


def test_correlation_degenerate() -> None:
    assert pearson([1, 2], [2, 3]).value is None
    const = spearman([1, 1, 1, 1], [1, 2, 3, 4])
    assert const.value is None and "constant" in const.note
    three = pearson([1, 2, 3], [1, 3, 2])
    assert three.value is not None and three.ci_low is None
    with pytest.raises(ValueError, match="length"):
        pearson([1, 2, 3], [1, 2])


def test_lin_ccc_formula_and_properties() -> None:
    x, y = _pair(2, missing=0)
    mx, my = x.mean(), y.mean()
    expected = 2 * np.mean((x - mx) * (y - my)) / (x.var() + y.var() + (mx - my) ** 2)
    est = lin_ccc(x, y)
    assert est.value == pytest.approx(expected, abs=TOL)
    assert est.ci_low < est.value < est.ci_high
    # Concordance is below Pearson whenever means or spreads differ, and equals it when they don't.
    assert est.value < pearson(x, y).value
    z = (y - y.mean()) / y.std() * x.std() + x.mean()
    assert lin_ccc(x, z).value == pytest.approx(pearson(x, z).value, abs=TOL)
    assert lin_ccc([2, 2, 2], [2, 2, 2]).value is None


# --------------------------------------------------------------------------- errors


def test_errors_and_bias_with_missing() -> None:
    x, y = _pair(3)
    xs, ys = _complete(x, y)
    d = xs - ys
    assert mae(x, y).value == pytest.approx(np.abs(d).mean(), abs=TOL)
    assert rmse(x, y).value == pytest.approx(math.sqrt((d**2).mean()), abs=TOL)
    w = within(x, y, 0.5)
    assert w.value == pytest.approx((np.abs(d) <= 0.5).mean(), abs=TOL) and w.n == d.size
    b = bias(x, y)
    lo, hi = sps.t.interval(0.95, d.size - 1, loc=d.mean(), scale=sps.sem(d))
    assert b.value == pytest.approx(d.mean(), abs=TOL)
    assert (b.ci_low, b.ci_high) == pytest.approx((lo, hi), abs=TOL)
    m = mae(x, y, seed=1)
    assert m.ci_low < m.value < m.ci_high
    assert mae([None], [1]).value is None
    assert within([None], [1]).value is None


def test_within_one_on_a_likert_scale() -> None:
    judge = [5, 4, 3, 1, None, 2]
    human = [5, 5, 1, 2, 3, None]
    est = within(judge, human)
    assert est.value == pytest.approx(3 / 4)
    assert est.n == 4


def test_bland_altman_limits() -> None:
    x, y = _pair(4, missing=0)
    d = x - y
    ba = bland_altman(x, y)
    assert ba.bias.value == pytest.approx(d.mean(), abs=TOL)
    assert ba.lower.value == pytest.approx(d.mean() - 1.96 * d.std(ddof=1), abs=TOL)
    assert ba.upper.value == pytest.approx(d.mean() + 1.96 * d.std(ddof=1), abs=TOL)
    assert ba.lower.ci_low < ba.lower.value < ba.lower.ci_high
    assert set(ba.to_dict()) == {"bias", "lower", "upper", "sd", "n"}
    assert bland_altman([1], [2]).lower.value is None
