"""Chance-corrected agreement: Cohen's kappa, Fleiss' kappa, Krippendorff's alpha, pairwise summaries.

Conventions shared by every function here:

* Rating matrices are **items x raters** (one row per item, one column per rater), given as a
  DataFrame (column names become rater names), a 2-D array or a list of rows. Krippendorff's own
  package uses raters x items; transpose before calling it.
* Missing ratings are None, NaN, pd.NA or NaT. Empty strings are *not* missing: map them first.
* Categories are the given ``labels`` (which also fixes their order for weighted kappa and ordinal
  alpha) or, when ``labels`` is None, the sorted distinct observed values. A rating outside ``labels``
  raises ValueError rather than being dropped silently (scikit-learn drops it).
* Intervals come from a percentile bootstrap over items (``n_boot`` resamples, seeded, vectorised).
  All ``n`` input items are resampled, including those with missing ratings (they contribute nothing),
  so statistics over the same items with the same seed see the same resamples; ``n_boot=0`` turns
  intervals off.
* An undefined statistic (nothing to compare, a single category so chance agreement is total)
  returns an Estimate with ``value=None`` and a ``note``; malformed arguments raise ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

import numpy as np
import pandas as pd

from mheval.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    Estimate,
    SumStat,
    is_missing,
    percentile_ci,
    undefined,
)

Weights = Literal["linear", "quadratic"] | None
Level = Literal["nominal", "ordinal", "interval"]
_MAX_ORDINAL_VALUES = 200


# --------------------------------------------------------------------------- input handling


def as_matrix(ratings: Any, name: str = "ratings") -> tuple[np.ndarray, list[str]]:
    """An items x raters object array and the rater names (DataFrame columns, else r0, r1, ...)."""
    if isinstance(ratings, pd.DataFrame):
        return ratings.to_numpy(dtype=object), [str(c) for c in ratings.columns]
    arr = np.asarray(ratings, dtype=object)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D items x raters matrix, got {arr.ndim} dimension(s)")
    return arr, [f"r{j}" for j in range(arr.shape[1])]


def categories(values: np.ndarray, labels: Sequence[Any] | None) -> list[Any]:
    """The category list: ``labels`` (checked to cover every observed value) or sorted observed values."""
    present = values[~is_missing(values)]
    if labels is not None:
        cats = list(labels)
        if len(set(cats)) != len(cats):
            raise ValueError("labels contain duplicates")
        unknown = sorted({str(v) for v in present} - {str(c) for c in cats})
        if set(pd.unique(present)) - set(cats):
            raise ValueError(f"ratings outside labels: {', '.join(unknown) or 'values of another type'}")
        return cats
    uniq = list(pd.unique(present))
    try:
        return sorted(uniq)
    except TypeError:
        return sorted(uniq, key=str)


def encode(values: np.ndarray, cats: Sequence[Any]) -> np.ndarray:
    """Integer codes (index into ``cats``) with -1 for missing, same shape as ``values``."""
    index = {c: i for i, c in enumerate(cats)}
    flat = values.ravel()
    miss = is_missing(flat)
    out = np.full(flat.shape, -1, dtype=np.int64)
    out[~miss] = [index[v] for v in flat[~miss]]
    return out.reshape(values.shape)


def _pair_columns(a: Any, b: Any) -> np.ndarray:
    a_arr = np.asarray(a, dtype=object).ravel()
    b_arr = np.asarray(b, dtype=object).ravel()
    if a_arr.shape != b_arr.shape:
        raise ValueError(f"a and b differ in length ({a_arr.size} vs {b_arr.size})")
    return np.column_stack([a_arr, b_arr]) if a_arr.size else np.empty((0, 2), dtype=object)


# --------------------------------------------------------------------------- Cohen's kappa


def _weight_matrix(k: int, weights: Weights) -> np.ndarray:
    i, j = np.indices((k, k))
    if weights is None:
        return (i != j).astype(np.float64)
    if weights == "linear":
        return np.abs(i - j).astype(np.float64)
    if weights == "quadratic":
        return ((i - j) ** 2).astype(np.float64)
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def kappa_sumstat(codes_a: np.ndarray, codes_b: np.ndarray, k: int, weights: Weights) -> SumStat:
    """Cohen's kappa as a statistic of per-item sums (one-hot of the (a, b) cell; zeros if missing)."""
    wt = _weight_matrix(k, weights)
    both = (codes_a >= 0) & (codes_b >= 0)
    S = np.zeros((codes_a.size, k * k))
    rows = np.flatnonzero(both)
    S[rows, codes_a[both] * k + codes_b[both]] = 1.0

    def statistic(s: np.ndarray) -> np.ndarray:
        cells = s.reshape((*s.shape[:-1], k, k))
        total = cells.sum(axis=(-2, -1))
        with np.errstate(invalid="ignore", divide="ignore"):
            expected = cells.sum(-1)[..., :, None] * cells.sum(-2)[..., None, :] / total[..., None, None]
            observed_d = (cells * wt).sum(axis=(-2, -1))
            expected_d = (expected * wt).sum(axis=(-2, -1))
            value = 1.0 - observed_d / expected_d
        ok = (total > 0) & (expected_d > 1e-12 * np.maximum(total, 1))
        return np.where(ok, value, np.nan)

    name = "Cohen's kappa" + (f" ({weights} weights)" if weights else "")
    return SumStat(S, statistic, f"{name}, n = items rated by both", int(both.sum()), "")


def _kappa_note(codes_a: np.ndarray, codes_b: np.ndarray) -> str:
    both = (codes_a >= 0) & (codes_b >= 0)
    if not both.any():
        return "no item was rated by both raters"
    used = set(codes_a[both]) | set(codes_b[both])
    if len(used) < 2:
        return "both raters used a single category, so chance agreement is total and kappa is undefined"
    return "expected disagreement is zero, so kappa is undefined"


def cohen_kappa(
    a: Sequence[Any] | np.ndarray,
    b: Sequence[Any] | np.ndarray,
    weights: Weights = None,
    labels: Sequence[Any] | None = None,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Cohen's kappa between two raters, optionally linear- or quadratic-weighted.

    Items where either rating is missing are left out (``n`` counts items rated by both). Weights use
    the distance between category *positions* in ``labels`` (or the sorted observed values), as
    scikit-learn does; pass the full scale as ``labels`` (e.g. 1..5) so an unused level still counts.
    A single shared category or no overlap gives value None with a note.
    """
    pairs = _pair_columns(a, b)
    cats = categories(pairs, labels)
    codes = encode(pairs, cats)
    stat = kappa_sumstat(codes[:, 0], codes[:, 1], len(cats), weights)
    if stat.n == 0:
        return undefined(stat.method, "no item was rated by both raters")
    est, _ = stat.estimate(n_boot, seed, confidence)
    if est.value is None:
        return undefined(stat.method, _kappa_note(codes[:, 0], codes[:, 1]), stat.n)
    return est


def cohen_kappa_point(a: Sequence[Any] | np.ndarray, b: Sequence[Any] | np.ndarray) -> float:
    """Unweighted Cohen's kappa of two label sequences as a bare float, for model selection and training
    figures (training.fit imports it as ``cohen_kappa``).

    Values are compared as text, so 1 and 1.0 from two sources are one label. Where `cohen_kappa` says
    "undefined" because both sequences hold one and the same label, this returns 1.0: agreement is total,
    and a loss of 1 - kappa must not be NaN there. No items at all gives NaN. No interval is computed.
    """
    est = cohen_kappa(np.asarray(a).astype(str), np.asarray(b).astype(str), n_boot=0)
    if est.value is None:
        return 1.0 if est.n else float("nan")
    return est.value


# --------------------------------------------------------------------------- Fleiss' kappa


def _category_counts(codes: np.ndarray, k: int) -> np.ndarray:
    """items x categories counts of ratings, ignoring missing (-1) codes."""
    n = codes.shape[0]
    counts = np.zeros((n, k))
    rows, cols = np.nonzero(codes >= 0)
    np.add.at(counts, (rows, codes[rows, cols]), 1.0)
    return counts


def fleiss_sumstat(codes: np.ndarray, k: int) -> SumStat:
    counts = _category_counts(codes, k)
    m = counts.sum(axis=1)
    keep = m >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        p_item = np.where(keep, ((counts**2).sum(axis=1) - m) / (m * (m - 1)), 0.0)
    S = np.column_stack([keep, p_item, counts * keep[:, None], m * keep]).astype(np.float64)

    def statistic(s: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            p_bar = s[..., 1] / s[..., 0]
            p_cat = s[..., 2 : 2 + k] / s[..., -1:]
            p_e = (p_cat**2).sum(axis=-1)
            value = (p_bar - p_e) / (1 - p_e)
        return np.where((s[..., 0] > 0) & (1 - p_e > 1e-12), value, np.nan)

    method = "Fleiss' kappa (items weighted equally, pooled category shares), n = items with 2+ ratings"
    return SumStat(S, statistic, method, int(keep.sum()), "")


def fleiss_kappa(
    ratings: Any,
    labels: Sequence[Any] | None = None,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Fleiss' kappa over an items x raters matrix of category labels.

    Missing ratings are allowed and items with fewer than two ratings are dropped. With unequal rater
    counts m_i we use the usual generalisation: observed agreement is the mean over items of the
    share of agreeing rater pairs, sum_j n_ij (n_ij - 1) / (m_i (m_i - 1)), each item weighted
    equally; chance agreement is sum_j p_j^2 with p_j the share of category j among all ratings of
    the kept items. With a constant number of raters this is exactly Fleiss (1971) (statsmodels'
    ``fleiss_kappa``). No item with two ratings, or one category throughout, gives value None.
    """
    mat, _ = as_matrix(ratings)
    cats = categories(mat, labels)
    stat = fleiss_sumstat(encode(mat, cats), len(cats))
    if stat.n == 0:
        return undefined(stat.method, "no item has two or more ratings")
    est, _ = stat.estimate(n_boot, seed, confidence)
    if est.value is None:
        return undefined(stat.method, "all ratings fall in a single category, so kappa is undefined", stat.n)
    return est


# --------------------------------------------------------------------------- Krippendorff's alpha


def _alpha_nominal_sumstat(codes: np.ndarray, k: int) -> SumStat:
    counts = _category_counts(codes, k)
    m = counts.sum(axis=1)
    keep = m >= 2
    counts = counts * keep[:, None]
    m = m * keep
    with np.errstate(invalid="ignore", divide="ignore"):
        agree = np.where(keep, (counts * (counts - 1)).sum(axis=1) / (m - 1), 0.0)
    S = np.column_stack([m, agree, counts])

    def statistic(s: np.ndarray) -> np.ndarray:
        n = s[..., 0]
        expected = n**2 - (s[..., 2:] ** 2).sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = 1 - (n - 1) * (n - s[..., 1]) / expected
        return np.where(expected > 1e-12 * np.maximum(n, 1) ** 2, value, np.nan)

    return SumStat(S, statistic, "Krippendorff's alpha (nominal)", int(keep.sum()), "")


def _alpha_ordinal_sumstat(codes: np.ndarray, k: int) -> SumStat:
    counts = _category_counts(codes, k)
    m = counts.sum(axis=1)
    keep = m >= 2
    counts = counts * keep[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(keep, 1.0 / (m - 1), 0.0)
    coincid = (counts[:, :, None] * counts[:, None, :] - counts[:, :, None] * np.eye(k)) * scale[:, None, None]
    S = coincid.reshape(codes.shape[0], k * k)

    def statistic(s: np.ndarray) -> np.ndarray:
        o = s.reshape((*s.shape[:-1], k, k))
        n_c = o.sum(axis=-1)
        n = n_c.sum(axis=-1)
        cum = np.cumsum(n_c, axis=-1)
        # Krippendorff's ordinal metric: (sum of n_g for g from c to k, minus (n_c + n_k) / 2) squared.
        delta = (cum[..., None, :] - cum[..., :, None] + (n_c[..., :, None] - n_c[..., None, :]) / 2) ** 2
        observed = (o * delta).sum(axis=(-2, -1))
        expected = (n_c[..., :, None] * n_c[..., None, :] * delta).sum(axis=(-2, -1))
        with np.errstate(invalid="ignore", divide="ignore"):
            value = 1 - (n - 1) * observed / expected
        return np.where(expected > 1e-12 * np.maximum(n, 1) ** 4, value, np.nan)

    return SumStat(S, statistic, "Krippendorff's alpha (ordinal)", int(keep.sum()), "")


def _alpha_interval_sumstat(values: np.ndarray) -> SumStat:
    ok = np.isfinite(values)
    m = ok.sum(axis=1).astype(np.float64)
    keep = m >= 2
    pairable = ok & keep[:, None]
    # Interval alpha is shift-invariant: centring keeps the sums of squares well conditioned.
    centre = values[pairable].mean() if pairable.any() else 0.0
    x = np.where(pairable, values - centre, 0.0)
    sx = x.sum(axis=1)
    sxx = (x**2).sum(axis=1)
    m = m * keep
    with np.errstate(invalid="ignore", divide="ignore"):
        within = np.where(keep, 2 * (m * sxx - sx**2) / (m - 1), 0.0)
    S = np.column_stack([m, sx, sxx, within])
    spread = float(np.mean(x[pairable] ** 2)) if pairable.any() else 0.0

    def statistic(s: np.ndarray) -> np.ndarray:
        n = s[..., 0]
        expected = 2 * (n * s[..., 2] - s[..., 1] ** 2)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = 1 - (n - 1) * s[..., 3] / expected
        return np.where(expected > 1e-12 * np.maximum(n, 1) ** 2 * max(spread, 1e-300), value, np.nan)

    return SumStat(S, statistic, "Krippendorff's alpha (interval)", int(keep.sum()), "")


def krippendorff_alpha(
    ratings: Any,
    level: Level = "nominal",
    labels: Sequence[Any] | None = None,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Krippendorff's alpha over an **items x raters** matrix (transpose of the krippendorff package).

    Missing ratings are allowed; items with fewer than two ratings are not pairable and are dropped
    (``n`` counts pairable items). ``level`` picks the difference metric: nominal (any labels),
    ordinal (Krippendorff's rank-frequency metric over ``labels`` order or sorted values) or interval
    (squared difference of numbers). Every pairable rating equal gives value None.
    """
    mat, _ = as_matrix(ratings)
    method = f"Krippendorff's alpha ({level})"
    if level == "interval":
        try:
            values = np.where(is_missing(mat), np.nan, mat).astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError("interval alpha needs numeric ratings") from None
        stat = _alpha_interval_sumstat(values)
    elif level in ("nominal", "ordinal"):
        cats = categories(mat, labels)
        if level == "ordinal" and len(cats) > _MAX_ORDINAL_VALUES:
            raise ValueError(f"ordinal alpha over {len(cats)} distinct values: use level='interval'")
        codes = encode(mat, cats)
        k = len(cats)
        stat = _alpha_nominal_sumstat(codes, k) if level == "nominal" else _alpha_ordinal_sumstat(codes, k)
    else:
        raise ValueError(f"level must be 'nominal', 'ordinal' or 'interval', got {level!r}")
    if stat.n == 0:
        return undefined(method, "no item has two or more ratings")
    est, _ = stat.estimate(n_boot, seed, confidence)
    if est.value is None:
        return undefined(method, "every pairable rating is the same value, so alpha is undefined", stat.n)
    return est


# --------------------------------------------------------------------------- pairwise summaries


@dataclass(frozen=True)
class PairEstimate:
    """One rater pair's statistic (``a`` is the first column or the target rater)."""

    a: str
    b: str
    estimate: Estimate

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, **self.estimate.to_dict()}


@dataclass(frozen=True)
class Pairwise:
    """A statistic over rater pairs, with the mean over pairs and its bootstrap interval."""

    statistic: str
    pairs: tuple[PairEstimate, ...]
    mean: Estimate

    @property
    def values(self) -> list[float]:
        return [p.estimate.value for p in self.pairs if p.estimate.value is not None]

    @property
    def low(self) -> float | None:
        return min(self.values) if self.values else None

    @property
    def high(self) -> float | None:
        return max(self.values) if self.values else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "statistic": self.statistic,
            "mean": self.mean.to_dict(),
            "min": self.low,
            "max": self.high,
            "pairs": [p.to_dict() for p in self.pairs],
        }


def combine_pairs(
    statistic: str,
    named: Sequence[tuple[str, str, SumStat]],
    *,
    n_boot: int,
    seed: int | None,
    confidence: float,
    notes: dict[tuple[str, str], str] | None = None,
) -> Pairwise:
    """Estimate each pair and the mean over pairs from aligned replicates (same items, same seed).

    Pairs whose statistic is undefined are left out of the mean (and said so in its note).
    """
    pairs: list[PairEstimate] = []
    point_vals: list[float] = []
    reps_list: list[np.ndarray] = []
    for a, b, stat in named:
        if stat.n == 0:
            est, reps = undefined(stat.method, "no item was rated by both raters"), None
        else:
            est, reps = stat.estimate(n_boot, seed, confidence)
            if est.value is None:
                why = (notes or {}).get((a, b)) or stat.undefined_note or "undefined on these ratings"
                est = undefined(stat.method, why, stat.n)
        pairs.append(PairEstimate(a, b, est))
        if est.value is not None:
            point_vals.append(est.value)
            if reps is not None:
                reps_list.append(reps)
    method = f"mean over rater pairs of {statistic}"
    if not point_vals:
        mean = undefined(method, "no rater pair has a defined value")
    else:
        left_out = len(pairs) - len(point_vals)
        note = f"{left_out} undefined pair(s) left out" if left_out else None
        lo: float | None = None
        hi: float | None = None
        if n_boot and reps_list and len(reps_list) == len(point_vals):
            lo, hi, bad = percentile_ci(np.mean(reps_list, axis=0), confidence)
            method += f"; {int(confidence * 100)}% percentile bootstrap over items, B={n_boot}"
            if bad:
                note = ((note + "; ") if note else "") + f"{bad} of {n_boot} resamples undefined"
        n_items = max(p.estimate.n for p in pairs)
        mean = Estimate(float(np.mean(point_vals)), lo, hi, n_items, method, note)
    return Pairwise(statistic, tuple(pairs), mean)


def rater_pairs(names: Sequence[str], against: str | None) -> list[tuple[int, int]]:
    """All unordered pairs of columns, or (against, other) pairs when a target rater is named."""
    if against is None:
        return list(combinations(range(len(names)), 2))
    if against not in names:
        raise ValueError(f"rater {against!r} is not a column; choose from {', '.join(names)}")
    t = names.index(against)
    return [(t, j) for j in range(len(names)) if j != t]


def pairwise_kappa(
    ratings: Any,
    *,
    against: str | None = None,
    weights: Weights = None,
    labels: Sequence[Any] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Pairwise:
    """Cohen's kappa for every pair of raters (or the ``against`` column versus each other rater).

    Needs a DataFrame (or matrix) of items x raters; categories are shared by all pairs. The mean's
    interval averages the pairs' bootstrap replicates, which are aligned because every pair is
    resampled over the same items with the same seed.
    """
    mat, names = as_matrix(ratings)
    cats = categories(mat, labels)
    codes = encode(mat, cats)
    named = []
    notes = {}
    for i, j in rater_pairs(names, against):
        named.append((names[i], names[j], kappa_sumstat(codes[:, i], codes[:, j], len(cats), weights)))
        notes[(names[i], names[j])] = _kappa_note(codes[:, i], codes[:, j])
    stat_name = "Cohen's kappa" + (f" ({weights} weights)" if weights else "")
    return combine_pairs(stat_name, named, n_boot=n_boot, seed=seed, confidence=confidence, notes=notes)


__all__ = [
    "PairEstimate",
    "Pairwise",
    "as_matrix",
    "categories",
    "cohen_kappa",
    "cohen_kappa_point",
    "combine_pairs",
    "encode",
    "fleiss_kappa",
    "kappa_sumstat",
    "krippendorff_alpha",
    "pairwise_kappa",
    "rater_pairs",
]
