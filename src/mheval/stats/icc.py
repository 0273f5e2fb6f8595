"""Intraclass correlation, two-way forms (McGraw & Wong 1996; Shrout & Fleiss 1979).

``kind`` names follow McGraw & Wong: "C" = consistency (rater offsets ignored), "A" = absolute
agreement (rater offsets count as disagreement); "1" = one rater's score, "k" = the mean of the k
raters. In Shrout & Fleiss terms C,1 = ICC(3,1), A,1 = ICC(2,1), C,k = ICC(3,k), A,k = ICC(2,k).

The matrix is **items x raters** of numbers. The two-way ANOVA needs complete rows, so items with any
missing rating are dropped (listwise, as pingouin's ``nan_policy='omit'``); ``n`` counts kept items.
Fewer than two items or raters, or no variance at all, gives value None with a note.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from scipy import stats as sps

from mheval.stats.agreement import Pairwise, as_matrix, combine_pairs, rater_pairs
from mheval.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    Estimate,
    SumStat,
    check_confidence,
    is_missing,
    undefined,
)

IccKind = Literal["C,1", "A,1", "C,k", "A,k"]
ICC_KINDS: tuple[str, ...] = ("C,1", "A,1", "C,k", "A,k")


def _check_kind(kind: str) -> str:
    if kind not in ICC_KINDS:
        raise ValueError(f"kind must be one of {', '.join(ICC_KINDS)}, got {kind!r}")
    return kind


def numeric_matrix(matrix: Any) -> np.ndarray:
    """items x raters float matrix, NaN for missing; ValueError for non-numbers."""
    mat, _ = as_matrix(matrix, "matrix")
    miss = is_missing(mat)
    out = np.full(mat.shape, np.nan)
    try:
        out[~miss] = mat[~miss].astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError("ICC needs numeric ratings (missing as None/NaN)") from None
    return out


def _icc_from_ms(msr, msc, mse, n, k, kind: str):
    """ICC of the given kind from mean squares (works elementwise on arrays)."""
    if kind == "C,1":
        return (msr - mse) / (msr + (k - 1) * mse)
    if kind == "A,1":
        return (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
    if kind == "C,k":
        return (msr - mse) / msr
    return (msr - mse) / (msr + (msc - mse) / n)


def icc_sumstat(values: np.ndarray, kind: str) -> SumStat:
    """ICC as a statistic of per-item sums; rows with a missing rating contribute zeros."""
    _check_kind(kind)
    _, k = values.shape
    complete = np.isfinite(values).all(axis=1)
    centre = values[complete].mean() if complete.any() else 0.0
    x = np.where(complete[:, None], values - centre, 0.0)
    row = x.sum(axis=1)
    S = np.column_stack([complete.astype(np.float64), x, (x**2).sum(axis=1), row**2])
    scale = float(np.mean(x[complete] ** 2)) if complete.any() else 0.0

    def statistic(s: np.ndarray) -> np.ndarray:
        n = s[..., 0]
        cols = s[..., 1 : 1 + k]
        total = cols.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = total**2 / (n * k)
            ss_total = s[..., 1 + k] - corr
            ss_rows = s[..., 2 + k] / k - corr
            ss_cols = (cols**2).sum(axis=-1) / n - corr
            ss_err = ss_total - ss_rows - ss_cols
            msr = ss_rows / (n - 1)
            msc = ss_cols / (k - 1)
            mse = ss_err / ((n - 1) * (k - 1))
            value = _icc_from_ms(msr, msc, mse, n, k, kind)
        # No spread at all (or all rows identical) leaves 0/0: undefined, not a number to report.
        ok = (n >= 2) & (ss_total > 1e-12 * n * k * max(scale, 1e-300))
        return np.where(ok & np.isfinite(value), value, np.nan)

    return SumStat(S, statistic, f"ICC({kind}) two-way", int(complete.sum()), "")


def _degenerate_note(values: np.ndarray) -> str | None:
    _, k = values.shape
    if k < 2:
        return "ICC needs at least two raters"
    complete = np.isfinite(values).all(axis=1)
    if complete.sum() < 2:
        return "ICC needs at least two items rated by every rater"
    kept = values[complete]
    if np.ptp(kept) == 0:
        return "all ratings are equal, so the ICC is undefined (no variance)"
    return None


def _mean_squares(x: np.ndarray) -> tuple[float, float, float]:
    n, k = x.shape
    grand = x.mean()
    ss_rows = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(axis=0) - grand) ** 2).sum()
    ss_err = ((x - grand) ** 2).sum() - ss_rows - ss_cols
    return ss_rows / (n - 1), ss_cols / (k - 1), ss_err / ((n - 1) * (k - 1))


def _f_interval(msr: float, msc: float, mse: float, n: int, k: int, kind: str, confidence: float):
    """McGraw & Wong (1996) F-based interval (the formulas pingouin and R's psych use)."""
    a = 1 - confidence
    df1, df2 = n - 1, (n - 1) * (k - 1)
    f_obs = msr / mse
    if kind.startswith("C"):
        f_low = f_obs / sps.f.ppf(1 - a / 2, df1, df2)
        f_high = f_obs * sps.f.ppf(1 - a / 2, df2, df1)
        if kind == "C,1":
            return (f_low - 1) / (f_low + k - 1), (f_high - 1) / (f_high + k - 1)
        return 1 - 1 / f_low, 1 - 1 / f_high
    icc_a1 = _icc_from_ms(msr, msc, mse, n, k, "A,1")
    fj = msc / mse
    vn = df2 * (k * icc_a1 * fj + n * (1 + (k - 1) * icc_a1) - k * icc_a1) ** 2
    vd = df1 * k**2 * icc_a1**2 * fj**2 + (n * (1 + (k - 1) * icc_a1) - k * icc_a1) ** 2
    v = vn / vd
    f_up = sps.f.ppf(1 - a / 2, df1, v)
    f_lo = sps.f.ppf(1 - a / 2, v, df1)
    low = n * (msr - f_up * mse) / (f_up * (k * msc + (k * n - k - n) * mse) + n * msr)
    high = n * (f_lo * msr - mse) / (k * msc + (k * n - k - n) * mse + n * f_lo * msr)
    if kind == "A,1":
        return low, high
    return low * k / (1 + low * (k - 1)), high * k / (1 + high * (k - 1))


def icc(matrix: Any, kind: IccKind = "C,1", *, confidence: float = DEFAULT_CONFIDENCE) -> Estimate:
    """Two-way ICC of an items x raters matrix with the McGraw & Wong F-based interval.

    ``p_value`` is the F test of no item effect (MSR / MSE). Items with a missing rating are dropped.
    """
    _check_kind(kind)
    check_confidence(confidence)
    values = numeric_matrix(matrix)
    method = f"ICC({kind}) two-way; {int(confidence * 100)}% F-based interval (McGraw & Wong)"
    note = _degenerate_note(values)
    complete = np.isfinite(values).all(axis=1)
    n = int(complete.sum())
    if note:
        return undefined(method, note, n)
    x = values[complete]
    k = x.shape[1]
    msr, msc, mse = _mean_squares(x - x.mean())
    value = float(_icc_from_ms(msr, msc, mse, n, k, kind))
    dropped = values.shape[0] - n
    note = f"{dropped} item(s) with a missing rating left out" if dropped else None
    if mse <= 0:
        # Perfect additive fit: the F statistic is infinite and the interval collapses on the value.
        return Estimate(value, value, value, n, method, note, p_value=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        low, high = _f_interval(msr, msc, mse, n, k, kind, confidence)
    p = float(sps.f.sf(msr / mse, n - 1, (n - 1) * (k - 1)))
    low_f = float(low) if math.isfinite(low) else None
    high_f = float(high) if math.isfinite(high) else None
    return Estimate(value, low_f, high_f, n, method, note, p_value=p)


def icc_bootstrap_ci(
    matrix: Any,
    kind: IccKind = "C,1",
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Two-way ICC with a percentile bootstrap interval from resampling items (rows), vectorised.

    Resamples in which the ICC is undefined (e.g. every draw the same item) are left out and counted
    in the note; items with a missing rating are resampled but contribute nothing.
    """
    values = numeric_matrix(matrix)
    stat = icc_sumstat(values, _check_kind(kind))
    note = _degenerate_note(values)
    if note:
        return undefined(stat.method, note, stat.n)
    est, _ = stat.estimate(n_boot, seed, confidence)
    return est


def pairwise_icc(
    matrix: Any,
    kind: IccKind = "A,1",
    *,
    against: str | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Pairwise:
    """Two-rater ICC for every pair of columns (or ``against`` versus each other column)."""
    mat, names = as_matrix(matrix, "matrix")
    values = numeric_matrix(mat)
    named, notes = [], {}
    for i, j in rater_pairs(names, against):
        pair = values[:, [i, j]]
        named.append((names[i], names[j], icc_sumstat(pair, kind)))
        notes[(names[i], names[j])] = _degenerate_note(pair) or "undefined on these ratings"
    return combine_pairs(f"ICC({kind})", named, n_boot=n_boot, seed=seed, confidence=confidence, notes=notes)


__all__ = ["ICC_KINDS", "icc", "icc_bootstrap_ci", "icc_sumstat", "numeric_matrix", "pairwise_icc"]
