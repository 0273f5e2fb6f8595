"""Agreement of two numeric ratings: correlations, errors, bias, concordance, Bland-Altman.

Every function takes two equal-length sequences ``x`` (by convention the judge) and ``y`` (the human)
and uses only the pairs where both are present (None/NaN are missing); ``n`` counts those pairs.
Differences are always ``x - y``, so a positive bias means the judge scores higher.
Undefined results (too few pairs, a constant variable) give value None with a note; lengths that
differ or values that are not numbers raise ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from mheval.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    Estimate,
    SumStat,
    check_confidence,
    numeric_vector,
    t_mean_ci,
    undefined,
    wilson,
)


def _aligned(x: Sequence[Any] | np.ndarray, y: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``x`` and ``y`` as float arrays of one length, and the mask of the pairs where both are present."""
    xa, ya = numeric_vector(x, "x"), numeric_vector(y, "y")
    if xa.shape != ya.shape:
        raise ValueError(f"x and y differ in length ({xa.size} vs {ya.size})")
    return xa, ya, np.isfinite(xa) & np.isfinite(ya)


def paired(x: Sequence[Any] | np.ndarray, y: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The complete pairs of ``x`` and ``y`` as float arrays."""
    xa, ya, ok = _aligned(x, y)
    return xa[ok], ya[ok]


def _z(confidence: float) -> float:
    return float(sps.norm.ppf(1 - (1 - check_confidence(confidence)) / 2))


def _pearson_r(x: np.ndarray, y: np.ndarray) -> float:
    xc, yc = x - x.mean(), y - y.mean()
    r = float((xc @ yc) / math.sqrt((xc @ xc) * (yc @ yc)))
    return max(-1.0, min(1.0, r))


def _correlation(
    x: Sequence[Any] | np.ndarray, y: Sequence[Any] | np.ndarray, name: str, confidence: float
) -> Estimate:
    xs, ys = paired(x, y)
    n = int(xs.size)
    spearman = name == "spearman"
    method = (
        "Spearman rho; Fisher z interval with Bonett-Wright variance (1 + rho^2/2)/(n-3)"
        if spearman
        else "Pearson r; Fisher z interval"
    )
    if n < 3:
        return undefined(method, f"needs at least 3 complete pairs, got {n}", n)
    if np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return undefined(method, "one of the two variables is constant, so the correlation is undefined", n)
    if spearman:
        xs, ys = sps.rankdata(xs), sps.rankdata(ys)
    r = _pearson_r(xs, ys)
    if abs(r) == 1.0:
        p = 0.0
    else:
        t = r * math.sqrt((n - 2) / (1 - r * r))
        p = float(2 * sps.t.sf(abs(t), n - 2))
    if n <= 3:
        return Estimate(r, None, None, n, method, "an interval needs at least 4 pairs", p_value=p)
    var = (1 + r * r / 2) / (n - 3) if spearman else 1 / (n - 3)
    z = math.atanh(r) if abs(r) < 1 else math.copysign(math.inf, r)
    half = _z(confidence) * math.sqrt(var)
    return Estimate(r, math.tanh(z - half), math.tanh(z + half), n, method, p_value=p)


def pearson(
    x: Sequence[Any] | np.ndarray, y: Sequence[Any] | np.ndarray, *, confidence: float = DEFAULT_CONFIDENCE
) -> Estimate:
    """Pearson correlation with a Fisher z interval (as scipy's ``pearsonr(...).confidence_interval()``)."""
    return _correlation(x, y, "pearson", confidence)


def spearman(
    x: Sequence[Any] | np.ndarray, y: Sequence[Any] | np.ndarray, *, confidence: float = DEFAULT_CONFIDENCE
) -> Estimate:
    """Spearman correlation (Pearson on average ranks) with a Fisher z interval.

    The standard error uses Bonett & Wright's (2000) variance (1 + rho^2/2)/(n - 3), which holds its
    coverage for rank correlations better than the Pearson 1/(n - 3). ``p_value`` is the t
    approximation scipy's ``spearmanr`` reports.
    """
    return _correlation(x, y, "spearman", confidence)


def lin_ccc(
    x: Sequence[Any] | np.ndarray, y: Sequence[Any] | np.ndarray, *, confidence: float = DEFAULT_CONFIDENCE
) -> Estimate:
    """Lin's concordance correlation coefficient with Lin's (1989, 2000) z-transform interval.

    Moments use 1/n (Lin's definition): rho_c = 2 s_xy / (s_x^2 + s_y^2 + (mean_x - mean_y)^2).
    """
    xs, ys = paired(x, y)
    n = int(xs.size)
    method = "Lin's concordance correlation; Fisher z interval (Lin 1989/2000 variance)"
    if n < 3:
        return undefined(method, f"needs at least 3 complete pairs, got {n}", n)
    mx, my = xs.mean(), ys.mean()
    sxx, syy = ((xs - mx) ** 2).mean(), ((ys - my) ** 2).mean()
    sxy = ((xs - mx) * (ys - my)).mean()
    denom = sxx + syy + (mx - my) ** 2
    if denom == 0:
        return undefined(method, "both variables are the same constant, so concordance is undefined", n)
    rc = float(2 * sxy / denom)
    if sxx == 0 or syy == 0:
        return Estimate(rc, None, None, n, method, "a constant variable: no interval")
    r = sxy / math.sqrt(sxx * syy)
    if r == 0 or abs(rc) >= 1:
        return Estimate(rc, None, None, n, method, "interval undefined at r = 0 or |rho_c| = 1")
    u = (mx - my) / math.sqrt(math.sqrt(sxx * syy))
    one = 1 - rc * rc
    var = (
        (1 - r * r) * rc * rc / (one * r * r)
        + 2 * rc**3 * (1 - rc) * u * u / (r * one * one)
        - rc**4 * u**4 / (2 * r * r * one * one)
    ) / (n - 2)
    if var <= 0:
        return Estimate(rc, None, None, n, method, "interval variance is not positive")
    half = _z(confidence) * math.sqrt(var)
    z = math.atanh(rc)
    return Estimate(rc, math.tanh(z - half), math.tanh(z + half), n, method)


# --------------------------------------------------------------------------- errors and bias


def diff_sumstat(
    x: Sequence[Any] | np.ndarray, y: Sequence[Any] | np.ndarray, kind: str, tolerance: float = 1.0
) -> SumStat:
    """mae / rmse / bias / within as statistics of per-item sums (zeros where a pair is missing)."""
    xa, ya, ok = _aligned(x, y)
    d = np.where(ok, xa - ya, 0.0)
    col = {
        "mae": np.abs(d),
        "rmse": d**2,
        "bias": d,
        "within": (np.abs(d) <= tolerance) & ok,
    }[kind]
    S = np.column_stack([ok, col]).astype(np.float64)

    def statistic(s: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            m = s[..., 1] / s[..., 0]
        return np.sqrt(m) if kind == "rmse" else m

    names = {
        "mae": "mean absolute error",
        "rmse": "root mean squared error",
        "bias": "mean difference x - y",
        "within": f"share of pairs within {tolerance:g}",
    }
    return SumStat(S, statistic, names[kind], int(ok.sum()), "no complete pairs")


def _boot_error(x, y, kind, n_boot, seed, confidence) -> Estimate:
    stat = diff_sumstat(x, y, kind)
    if stat.n == 0:
        return undefined(stat.method, "no complete pairs")
    est, _ = stat.estimate(n_boot, seed, confidence)
    return est


def mae(
    x: Sequence[Any] | np.ndarray,
    y: Sequence[Any] | np.ndarray,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Mean absolute error |x - y| with a percentile bootstrap interval over pairs."""
    return _boot_error(x, y, "mae", n_boot, seed, confidence)


def rmse(
    x: Sequence[Any] | np.ndarray,
    y: Sequence[Any] | np.ndarray,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Root mean squared error with a percentile bootstrap interval over pairs."""
    return _boot_error(x, y, "rmse", n_boot, seed, confidence)


def within(
    x: Sequence[Any] | np.ndarray,
    y: Sequence[Any] | np.ndarray,
    tolerance: float = 1.0,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Share of pairs with |x - y| <= tolerance (the "within-1 rate"), Wilson interval."""
    xs, ys = paired(x, y)
    method = f"share of pairs within {tolerance:g}; Wilson interval"
    if xs.size == 0:
        return undefined(method, "no complete pairs")
    est = wilson(int((np.abs(xs - ys) <= tolerance).sum()), int(xs.size), confidence)
    return Estimate(est.value, est.ci_low, est.ci_high, est.n, method)


def bias(
    x: Sequence[Any] | np.ndarray, y: Sequence[Any] | np.ndarray, *, confidence: float = DEFAULT_CONFIDENCE
) -> Estimate:
    """Mean difference x - y (judge minus human) with a Student-t interval; ``p_value`` tests zero."""
    xs, ys = paired(x, y)
    est = t_mean_ci(xs - ys, confidence)
    method = "mean difference x - y; Student-t interval"
    note = "no complete pairs" if est.value is None else est.note
    return Estimate(est.value, est.ci_low, est.ci_high, est.n, method, note, est.p_value)


@dataclass(frozen=True)
class BlandAltman:
    """Bland-Altman summary: mean difference and the limits within which most differences fall."""

    bias: Estimate
    lower: Estimate
    upper: Estimate
    sd: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "bias": self.bias.to_dict(),
            "lower": self.lower.to_dict(),
            "upper": self.upper.to_dict(),
            "sd": self.sd,
            "n": self.n,
        }


def bland_altman(
    x: Sequence[Any] | np.ndarray,
    y: Sequence[Any] | np.ndarray,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    limit_z: float = 1.96,
) -> BlandAltman:
    """Limits of agreement bias +/- limit_z * sd of (x - y), each with the Bland & Altman (1999)
    approximate interval: limit +/- t * sqrt(3 sd^2 / n). Fewer than two pairs: limits undefined."""
    xs, ys = paired(x, y)
    d = xs - ys
    n = int(d.size)
    b = bias(xs, ys, confidence=confidence)
    method = f"Bland-Altman limit (bias +/- {limit_z:g} sd); approximate t interval"
    if n < 2:
        none = undefined(method, "needs at least 2 complete pairs", n)
        return BlandAltman(b, none, none, None, n)
    sd = float(d.std(ddof=1))
    t = float(sps.t.ppf(1 - (1 - check_confidence(confidence)) / 2, n - 1))
    half = t * math.sqrt(3 * sd * sd / n)
    lo, hi = float(d.mean()) - limit_z * sd, float(d.mean()) + limit_z * sd
    lower = Estimate(lo, lo - half, lo + half, n, method)
    upper = Estimate(hi, hi - half, hi + half, n, method)
    return BlandAltman(b, lower, upper, sd, n)


__all__ = [
    "BlandAltman",
    "bias",
    "bland_altman",
    "diff_sumstat",
    "lin_ccc",
    "mae",
    "paired",
    "pearson",
    "rmse",
    "spearman",
    "within",
]
