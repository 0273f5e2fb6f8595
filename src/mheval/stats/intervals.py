"""Estimates with intervals: the shared result type, Wilson intervals and a vectorised bootstrap.

Every statistic in `mheval.stats` returns an `Estimate`. When a statistic is undefined on the data it
was given (too few items, no variance, a single category, everything missing) the estimate carries
``value=None`` and a ``note`` saying why: a NaN never leaves this package silently. Malformed
arguments (wrong shape, unknown option, mismatched lengths) raise ``ValueError`` instead.

The bootstrap here works on *per-item sufficient statistics*: a statistic is written as a function of
column sums of an ``items x p`` matrix ``S`` (one row per item, zeros for an item that does not take
part). A bootstrap replicate is then ``W @ S`` where ``W`` holds how often each item was drawn, so a
thousand replicates cost one matrix product instead of a Python loop. Because ``W`` depends only on
``(n_items, n_boot, seed)``, two statistics computed over the same items with the same seed see the
same resamples, so their replicates can be combined (for example averaged over rater pairs).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

DEFAULT_N_BOOT = 1000
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95
# Bootstrap replicates are generated in blocks so memory stays near _BLOCK_CELLS floats whatever n is.
_BLOCK_CELLS = 2_000_000
# Seeded resampling plans up to this many draws (one byte each) are kept for reuse; see _cached_weights.
_CACHE_CELLS = 20_000_000
_FLOAT_CACHE_CELLS = 5_000_000


@dataclass(frozen=True)
class Estimate:
    """A point estimate with an optional interval.

    ``value is None`` means the statistic is undefined on this input; ``note`` says why. ``n`` is the
    number of items (or pairs, or ratings: ``method`` says which) the estimate rests on.
    """

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    method: str = ""
    note: str | None = None
    p_value: float | None = None

    @property
    def defined(self) -> bool:
        return self.value is not None

    @property
    def width(self) -> float | None:
        """Width of the interval, or None when there is no interval."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return self.ci_high - self.ci_low

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["width"] = self.width
        return out

    def format(self, digits: int = 3) -> str:
        """Short human-readable form: ``0.553 [0.45, 0.65]`` or ``n/a (why)``."""
        if self.value is None:
            return f"n/a ({self.note})" if self.note else "n/a"
        text = f"{self.value:.{digits}f}"
        if self.ci_low is not None and self.ci_high is not None:
            text += f" [{self.ci_low:.{digits - 1}f}, {self.ci_high:.{digits - 1}f}]"
        return text


def undefined(method: str, note: str, n: int = 0) -> Estimate:
    """The estimate of a statistic that has no value on this input."""
    return Estimate(value=None, n=n, method=method, note=note)


def is_missing(values: Any) -> np.ndarray:
    """Boolean mask of missing entries: None, NaN, pd.NA and NaT count as missing (empty strings do not)."""
    return np.asarray(pd.isna(np.asarray(values, dtype=object)), dtype=bool)


def check_confidence(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return confidence


# --------------------------------------------------------------------------- bootstrap machinery


def _generate_weights(n: int, n_boot: int, seed: int | None):
    rng = np.random.default_rng(seed)
    block = max(1, min(n_boot, _BLOCK_CELLS // max(n, 1)))
    done = 0
    while done < n_boot:
        b = min(block, n_boot - done)
        idx = rng.integers(0, n, size=(b, n))
        flat = (idx + n * np.arange(b)[:, None]).ravel()
        yield np.bincount(flat, minlength=b * n).reshape(b, n)
        done += b


@functools.lru_cache(maxsize=2)
def _cached_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    """All multiplicities for a seeded resampling plan, as small integers, read-only.

    A memo of a pure function (same arguments, same array): a report that bootstraps dozens of
    statistics over the same items draws the resamples once instead of once per statistic.
    """
    counts = np.vstack(list(_generate_weights(n, n_boot, seed)))
    # Small plans are kept as floats, ready for the matrix product; large ones as bytes to save memory.
    dtype = np.float64 if counts.size <= _FLOAT_CACHE_CELLS else np.min_scalar_type(int(counts.max()))
    counts = counts.astype(dtype)
    counts.setflags(write=False)
    return counts


def bootstrap_weights(n: int, n_boot: int, seed: int | None):
    """Yield blocks of resampling multiplicities, shape ``(block, n)``; rows sum to ``n``.

    Replicate ``i`` depends only on ``(n, n_boot, seed)``: callers rely on this to align replicates of
    different statistics over the same items. Seeded plans up to _CACHE_CELLS draws are memoised.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if n < 1:
        raise ValueError("cannot bootstrap zero items")
    if isinstance(seed, int | np.integer) and n * n_boot <= _CACHE_CELLS:
        counts = _cached_weights(n, n_boot, int(seed))
        block = max(1, min(n_boot, _BLOCK_CELLS // n))
        for start in range(0, n_boot, block):
            yield counts[start : start + block].astype(np.float64, copy=False)
        return
    for counts in _generate_weights(n, n_boot, seed):
        yield counts.astype(np.float64)


def bootstrap_sums(S: np.ndarray, n_boot: int, seed: int | None) -> np.ndarray:
    """Column sums of ``S`` (items x p) under ``n_boot`` item resamples: shape ``(n_boot, p)``."""
    S = np.asarray(S, dtype=np.float64)
    if S.ndim == 1:
        S = S[:, None]
    parts = [W @ S for W in bootstrap_weights(S.shape[0], n_boot, seed)]
    return np.vstack(parts)


def percentile_ci(
    replicates: np.ndarray, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float | None, float | None, int]:
    """Percentile interval over the finite replicates; also returns how many were undefined."""
    reps = np.asarray(replicates, dtype=np.float64)
    ok = np.isfinite(reps)
    bad = int((~ok).sum())
    # Fewer than half usable replicates means the interval would describe a different population.
    if ok.sum() < max(2, reps.size // 2):
        return None, None, bad
    alpha = 1 - check_confidence(confidence)
    lo, hi = np.quantile(reps[ok], [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi), bad


def sums_estimate(
    S: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    method: str,
    n: int,
    n_boot: int,
    seed: int | None,
    confidence: float,
    undefined_note: str,
) -> tuple[Estimate, np.ndarray | None]:
    """Point estimate and percentile bootstrap interval of a statistic of column sums.

    ``statistic`` maps an array ``(..., p)`` of sums to ``(...)`` values, NaN where undefined.
    Returns the estimate and the replicates (None when ``n_boot == 0``).
    """
    S = np.asarray(S, dtype=np.float64)
    point = float(statistic(S.sum(axis=0)))
    if not math.isfinite(point):
        return undefined(method, undefined_note, n=n), None
    if n_boot == 0 or S.shape[0] == 0:
        return Estimate(point, None, None, n, method), None
    reps = statistic(bootstrap_sums(S, n_boot, seed))
    lo, hi, bad = percentile_ci(reps, confidence)
    note = None
    if bad:
        note = f"{bad} of {n_boot} bootstrap resamples were undefined and left out"
    method = f"{method}; {int(confidence * 100)}% percentile bootstrap over items, B={n_boot}"
    return Estimate(point, lo, hi, n, method, note), reps


@dataclass(frozen=True)
class SumStat:
    """A statistic of per-item sums: how to build the item rows and how to read the sums.

    Used to compute several statistics over the same items with aligned bootstrap replicates.
    """

    item_stats: np.ndarray
    statistic: Callable[[np.ndarray], np.ndarray]
    method: str
    n: int
    undefined_note: str

    def estimate(self, n_boot: int, seed: int | None, confidence: float) -> tuple[Estimate, np.ndarray | None]:
        return sums_estimate(
            self.item_stats,
            self.statistic,
            method=self.method,
            n=self.n,
            n_boot=n_boot,
            seed=seed,
            confidence=confidence,
            undefined_note=self.undefined_note,
        )


# --------------------------------------------------------------------------- rates and means


def rate_upper_bound(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The one-sided upper bound (Clopper-Pearson) of a rate seen as ``successes / n``: what a rate of
    0 of 70 may still be."""
    if successes >= n:
        return 1.0
    return float(sps.beta.ppf(check_confidence(confidence), successes + 1, n - successes))


def wilson(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> Estimate:
    """Rate ``successes / n`` with the Wilson score interval.

    ``n == 0`` gives an undefined estimate (value None). Counts must satisfy ``0 <= successes <= n``.
    """
    method = "rate; Wilson score interval"
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return undefined(method, "no observations", 0)
    z = float(sps.norm.ppf(1 - (1 - check_confidence(confidence)) / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # The bounds are exactly 0 at k = 0 and 1 at k = n; rounding gives 5.6e-17 or 0.9999999999999999,
    # which put the interval beside its own point (a negative error bar), so pin them.
    low, high = clamp_proportion(0.0 if successes == 0 else centre - half, 1.0 if successes == n else centre + half, p)
    return Estimate(p, low, high, n, method)


def clamp_proportion(
    low: float | None, high: float | None, value: float | None = None
) -> tuple[float | None, float | None]:
    """An interval of a proportion kept inside [0, 1] and around its point estimate (when given)."""
    if low is not None:
        low = min(max(0.0, low), 1.0)
        if value is not None:
            low = min(low, value)
    if high is not None:
        high = min(max(0.0, high), 1.0)
        if value is not None:
            high = max(high, value)
    return low, high


def numeric_vector(x: Any, name: str = "x") -> np.ndarray:
    """Float array with NaN for missing; ValueError for values that are not numbers."""
    arr = np.asarray(x, dtype=object).ravel()
    miss = is_missing(arr)
    out = np.full(arr.shape, np.nan)
    try:
        out[~miss] = arr[~miss].astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must hold numbers (missing as None/NaN): {exc}") from None
    return out


def bootstrap_mean_ci(
    x: Sequence[float] | np.ndarray,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Mean of ``x`` with a seeded, vectorised percentile bootstrap interval.

    Missing values (None/NaN) are dropped first. No values gives value None; one value gives the value
    without an interval (a resample of one point has no spread to speak of).
    """
    vals = numeric_vector(x)
    vals = vals[np.isfinite(vals)]
    method = "mean"
    if vals.size == 0:
        return undefined(method, "no non-missing values")
    if vals.size == 1:
        return Estimate(float(vals[0]), None, None, 1, method, "a single value has no interval")
    S = np.column_stack([np.ones_like(vals), vals])
    est, _ = sums_estimate(
        S,
        lambda s: s[..., 1] / s[..., 0],
        method=method,
        n=int(vals.size),
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
        undefined_note="undefined mean",
    )
    return est


def t_mean_ci(x: Sequence[float] | np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> Estimate:
    """Mean with a Student-t interval; missing values dropped. Fewer than two values: no interval."""
    vals = numeric_vector(x)
    vals = vals[np.isfinite(vals)]
    method = "mean; Student-t interval"
    if vals.size == 0:
        return undefined(method, "no non-missing values")
    m = float(vals.mean())
    if vals.size == 1:
        return Estimate(m, None, None, 1, method, "a single value has no interval")
    se = float(vals.std(ddof=1)) / math.sqrt(vals.size)
    t = sps.t.ppf(1 - (1 - check_confidence(confidence)) / 2, vals.size - 1)
    p = float(2 * sps.t.sf(abs(m / se), vals.size - 1)) if se > 0 else None
    return Estimate(m, float(m - t * se), float(m + t * se), int(vals.size), method, p_value=p)


__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_N_BOOT",
    "DEFAULT_SEED",
    "Estimate",
    "SumStat",
    "bootstrap_mean_ci",
    "bootstrap_sums",
    "bootstrap_weights",
    "clamp_proportion",
    "is_missing",
    "numeric_vector",
    "percentile_ci",
    "sums_estimate",
    "t_mean_ci",
    "undefined",
    "wilson",
]
