"""Choosing which units humans rate: Neyman allocation over strata, and what more ratings would buy.

Pure functions. A stratified design rates n_h of the N_h judged units of stratum h; the corrected estimate
(mheval.stats.corrected) weights each stratum by N_h / N, so any allocation stays unbiased, and the
allocation that minimises the variance for a fixed total is Neyman's, n_h proportional to N_h S_h, where
S_h is the spread of what the humans correct in that stratum (Fisch et al., arXiv 2406.04291, allocate
PPI's label budget this way).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mheval.stats.corrected import CorrectedEstimate


def neyman_allocation(sizes: Any, spreads: Any, total: int, *, minimum: int = 2) -> np.ndarray:
    """How many units to rate in each stratum: proportional to size x spread, summing to ``total``.

    Every non-empty stratum gets at least ``minimum`` (or all its units when smaller; a stratum needs two
    ratings for an interval), no stratum more than its size; what a full stratum cannot take goes to the
    others in proportion. A zero spread everywhere falls back to proportional allocation. Whole numbers by
    largest remainders, so the sum is exact. ``total`` is capped at the number of units.
    """
    size = np.asarray(sizes, dtype=int).ravel()
    spread = np.asarray(spreads, dtype=float).ravel()
    if size.shape != spread.shape:
        raise ValueError("sizes and spreads must have the same length")
    if np.any(size < 0) or np.any(~np.isfinite(spread)) or np.any(spread < 0):
        raise ValueError("sizes must be >= 0 and spreads finite and >= 0")
    total = int(min(max(total, 0), size.sum()))
    score = size * spread
    if score.sum() <= 0:
        score = size.astype(float)
    lower = np.minimum(size, minimum)
    if lower.sum() >= total:
        # Not even the minimum fits everywhere: the largest strata get it first.
        out = np.zeros_like(size)
        for i in np.argsort(-size, kind="stable"):
            out[i] = min(lower[i], total - out.sum())
        return out
    fixed = np.zeros(size.size, dtype=bool)
    while True:
        x = _capped_share(np.where(fixed, 0.0, score), np.where(fixed, 0, size), total - int(lower[fixed].sum()))
        x[fixed] = lower[fixed]
        short = ~fixed & (x < lower)
        if not short.any():
            break
        fixed |= short
    out = np.floor(x + 1e-9).astype(int)
    for i in np.argsort(-(x - out), kind="stable"):
        if out.sum() >= total:
            break
        if out[i] < size[i]:
            out[i] += 1
    return out


def _capped_share(score: np.ndarray, cap: np.ndarray, budget: float) -> np.ndarray:
    """``budget`` shared in proportion to ``score`` with no share above ``cap`` (real numbers)."""
    x = np.zeros(score.size)
    active = cap > 0
    left = float(budget)
    while active.any() and left > 0:
        weight = np.where(active, score, 0.0)
        if weight.sum() <= 0:
            weight = np.where(active, cap.astype(float), 0.0)
        share = left * weight / weight.sum()
        over = active & (share >= cap)
        if not over.any():
            x[active] = share[active]
            break
        x[over] = cap[over]
        left -= float(cap[over].sum())
        active &= ~over
    return x


def inclusion_probabilities(sizes: Any, allocation: Any) -> np.ndarray:
    """n_h / N_h per stratum (0 for an empty stratum)."""
    size = np.asarray(sizes, dtype=float).ravel()
    alloc = np.asarray(allocation, dtype=float).ravel()
    return np.divide(alloc, size, out=np.zeros_like(alloc), where=size > 0)


def binary_spread(p: Any) -> np.ndarray:
    """sqrt(p(1-p)): the spread of a 0/1 outcome with probability p (a judge's confidence as a pilot S_h)."""
    q = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    return np.sqrt(q * (1 - q))


def ratings_to_halve(est: CorrectedEstimate) -> int | None:
    """How many more human ratings (spread like the current ones) would halve ``est``'s interval.

    The variance is var_human * n / n' + var_judge; solving var(n') = var / 4 gives n'. None when the
    estimate has no interval, or when the judge's part alone is more than a quarter of the variance
    (more ratings cannot halve it then). The answer may exceed the units left to rate; callers say so.
    """
    if est.var_human is None or est.var_judge is None or est.n_human < 1:
        return None
    total = est.var_human + est.var_judge
    if total <= 0:
        return None
    room = total / 4 - est.var_judge
    if room <= 0:
        return None
    needed = est.var_human * est.n_human / room
    return max(0, math.ceil(needed - 1e-9) - est.n_human)
