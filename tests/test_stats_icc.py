"""ICC against pingouin, the F-based interval, the vectorised bootstrap and degenerate input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest

from mheval.stats import icc, icc_bootstrap_ci, pairwise_icc
from mheval.stats.icc import icc_sumstat

TOL = 1e-9
PG_NAMES = {"C,1": "ICC(C,1)", "A,1": "ICC(A,1)", "C,k": "ICC(C,k)", "A,k": "ICC(A,k)"}


def _pingouin(matrix: np.ndarray, rounded: bool = False) -> pd.DataFrame:
    long = pd.DataFrame(matrix).reset_index().melt(id_vars="index", var_name="rater", value_name="score")
    if rounded:
        return pg.intraclass_corr(long, "index", "rater", "score", nan_policy="omit").set_index("Type")
    saved = dict(pg.options)
    pg.options["round.column.CI95"] = None
    try:
        return pg.intraclass_corr(long, "index", "rater", "score", nan_policy="omit").set_index("Type")
    finally:
        pg.options.clear()
        pg.options.update(saved)


def _sample(seed: int, n: int = 25, k: int = 4, missing: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1)) * 1.5 + rng.normal(size=(n, k)) + np.linspace(0, 1, k)
    x[rng.random(x.shape) < missing] = np.nan
    return x


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["C,1", "A,1", "C,k", "A,k"])
def test_icc_and_f_interval_match_pingouin(seed: int, kind: str) -> None:
    x = _sample(seed, missing=0.05 if seed % 2 else 0.0)
    ref = _pingouin(x).loc[PG_NAMES[kind]]
    ours = icc(x, kind)
    assert ours.value == pytest.approx(ref["ICC"], abs=TOL)
    assert ours.ci_low == pytest.approx(ref["CI95"][0], abs=TOL)
    assert ours.ci_high == pytest.approx(ref["CI95"][1], abs=TOL)
    assert ours.p_value == pytest.approx(ref["pval"], rel=1e-9, abs=1e-300)
    assert ours.n == int(np.isfinite(x).all(axis=1).sum())


def test_pingouin_rounds_its_interval_by_default() -> None:
    # Why the comparison above switches rounding off: pingouin's default prints CI95 to 2 decimals.
    x = _sample(1)
    ref = _pingouin(x, rounded=True).loc["ICC(A,1)", "CI95"]
    ours = icc(x, "A,1")
    assert ref[0] == round(ours.ci_low, 2)
    assert abs(ref[0] - ours.ci_low) > 0 or abs(ref[1] - ours.ci_high) > 0


def test_two_rater_icc_matches_pingouin() -> None:
    x = _sample(2, n=9, k=2)
    ref = _pingouin(x)
    for kind in ("C,1", "A,1"):
        assert icc(x, kind).value == pytest.approx(ref.loc[PG_NAMES[kind], "ICC"], abs=TOL)


@pytest.mark.parametrize("kind", ["C,1", "A,1", "C,k", "A,k"])
def test_bootstrap_equals_explicit_loop_over_the_same_resamples(kind: str) -> None:
    x = _sample(3, n=12, k=3)
    n_boot, seed = 300, 21
    fast = icc_bootstrap_ci(x, kind, n_boot=n_boot, seed=seed)
    # The same draws, one resample at a time (small n: one block holds every replicate).
    idx = np.random.default_rng(seed).integers(0, 12, size=(n_boot, 12))
    slow = []
    for rows in idx:
        est = icc(x[rows], kind)
        slow.append(np.nan if est.value is None else est.value)
    slow = np.array(slow)
    lo, hi = np.quantile(slow[np.isfinite(slow)], [0.025, 0.975])
    assert fast.value == pytest.approx(icc(x, kind).value, abs=TOL)
    assert fast.ci_low == pytest.approx(lo, abs=1e-9)
    assert fast.ci_high == pytest.approx(hi, abs=1e-9)


def test_bootstrap_is_seeded_and_handles_missing_rows() -> None:
    x = _sample(4, n=40, missing=0.05)
    a = icc_bootstrap_ci(x, "A,1", n_boot=500, seed=1)
    b = icc_bootstrap_ci(x, "A,1", n_boot=500, seed=1)
    c = icc_bootstrap_ci(x, "A,1", n_boot=500, seed=2)
    assert a == b and a.ci_low != c.ci_low
    assert a.value == pytest.approx(icc(x, "A,1").value, abs=TOL)
    assert a.ci_low < a.value < a.ci_high


def test_sumstat_marks_undefined_resamples() -> None:
    # Two identical items: a resample drawing one item twice has no spread at all.
    x = np.array([[1.0, 2.0], [3.0, 5.0]])
    est = icc_bootstrap_ci(x, "C,1", n_boot=200, seed=0)
    assert est.value is not None
    stat = icc_sumstat(x, "C,1")
    assert np.isnan(stat.statistic(stat.item_stats[[0, 0]].sum(axis=0)))


def test_pairwise_icc_equals_two_column_icc() -> None:
    x = _sample(5, n=30, k=3, missing=0.05)
    frame = pd.DataFrame(x, columns=["j", "h1", "h2"])
    pw = pairwise_icc(frame, "A,1", against="j", n_boot=200)
    for p in pw.pairs:
        assert p.estimate.value == pytest.approx(icc(frame[[p.a, p.b]], "A,1").value, abs=TOL)
    assert pw.mean.value == pytest.approx(np.mean(pw.values), abs=TOL)


def test_degenerate_icc() -> None:
    const = icc([[3, 3], [3, 3], [3, 3]])
    assert const.value is None and "no variance" in const.note
    one_rater = icc([[1], [2], [3]])
    assert one_rater.value is None and "two raters" in one_rater.note
    one_item = icc([[1, 2], [None, 3]])
    assert one_item.value is None and "two items" in one_item.note
    assert icc_bootstrap_ci([[np.nan, np.nan]], "A,1").value is None
    with pytest.raises(ValueError, match="kind"):
        icc([[1, 2], [2, 3]], "B,1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="numeric"):
        icc([["a", "b"], ["c", "d"]])


def test_perfect_agreement_collapses_interval() -> None:
    x = np.array([[1.0, 1.0], [2.0, 2.0], [4.0, 4.0]])
    est = icc(x, "A,1")
    assert est.value == pytest.approx(1.0)
    assert est.ci_low == est.ci_high == est.value
