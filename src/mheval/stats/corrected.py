"""Judge-error-corrected means and rates: prediction-powered inference (PPI, PPI++) and Rogan-Gladen.

Inputs are aligned per-unit arrays over every unit the judge judged:

- ``judge``: the judge's output (a score, or 0/1 for a binary measure); NaN where the judge gave nothing,
  and such a unit is left out of the population (counted in ``note``).
- ``human``: the humans' value for the rated units (the mean over raters when several rated a unit), NaN
  for the units no human rated.
- ``strata`` (optional): a stratum label per unit. The rated units are taken as a random sample *within*
  each stratum, so a design that oversampled, say, judge-flagged units stays unbiased: each stratum is
  estimated on its own and weighted by its share of the judged units.
- ``inclusion`` (optional): the probability that each unit was chosen for rating (independent draws).
  Rated units are then weighted by 1/probability (Horvitz-Thompson; Zrnic and Candes, arXiv 2403.03208).

The target is the mean a human would give over all judged units. Without strata or inclusion
probabilities, PPI++ follows Angelopoulos, Duchi and Zrnic (arXiv 2311.01453) with the rated units as the
labelled set and the judged but unrated units as the unlabelled set, so it agrees with ``ppi_py``'s
``ppi_mean_pointestimate`` / ``ppi_mean_ci`` (tests check this to 1e-6). The interval is normal (z).

Rogan-Gladen corrects the judge's positive rate p with its sensitivity q1 and specificity q0 measured on the
rated units, theta = (p + q0 - 1) / (q0 + q1 - 1); its standard error carries both the test sample (all
judged units) and the calibration sample (the rated units), as Lee et al. (arXiv 2511.21140) give it.

Nothing here invents a number: when an estimate is undefined (no human ratings, a single one, a stratum
without two ratings, q0 + q1 <= 1) ``corrected`` is None and ``note`` says why.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from mheval.stats.intervals import check_confidence

PPI = "ppi"
PPI_PLUS = "ppi++"
HUMAN_ONLY = "human-only"
ROGAN_GLADEN = "rogan-gladen"


@dataclass(frozen=True)
class CorrectedEstimate:
    """A mean or rate over the judged units: the judge's figure, the humans' figure and the corrected one.

    ``ci`` is the interval of ``corrected``. ``var_human`` and ``var_judge`` split the corrected estimate's
    variance into the part that shrinks with more human ratings and the part that does not (used to say
    how many more ratings would halve the interval). ``lam`` is the weight given to the judge (PPI++).
    """

    judge_only: float | None
    human_only: float | None
    corrected: float | None
    ci: tuple[float, float] | None
    n_human: int
    n_judged: int
    method: str
    judge_only_ci: tuple[float, float] | None = None
    human_only_ci: tuple[float, float] | None = None
    lam: float | None = None
    var_human: float | None = None
    var_judge: float | None = None
    confidence: float = 0.95
    note: str | None = None

    @property
    def defined(self) -> bool:
        return self.corrected is not None

    @property
    def width(self) -> float | None:
        return None if self.ci is None else self.ci[1] - self.ci[0]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("ci", "judge_only_ci", "human_only_ci"):
            out[key] = None if out[key] is None else [float(v) for v in out[key]]
        return out


# ----------------------------------------------------------------------------------------- inputs


def _prepare(
    judge: Any, human: Any, strata: Any, inclusion: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, int]:
    """Float arrays with the unjudged units removed; returns how many were removed."""
    f = np.asarray(judge, dtype=float).ravel()
    y = np.asarray(human, dtype=float).ravel()
    if f.shape != y.shape:
        raise ValueError(f"judge and human must have the same length, got {f.size} and {y.size}")
    s = None if strata is None else np.asarray(strata, dtype=object).ravel()
    p = None if inclusion is None else np.asarray(inclusion, dtype=float).ravel()
    if s is not None and s.size != f.size:
        raise ValueError(f"strata must have one label per unit ({f.size}), got {s.size}")
    if p is not None and p.size != f.size:
        raise ValueError(f"inclusion must have one probability per unit ({f.size}), got {p.size}")
    if s is not None and p is not None:
        raise ValueError("give strata or inclusion probabilities, not both")
    keep = np.isfinite(f)
    dropped = int((~keep).sum())
    f, y = f[keep], y[keep]
    s = None if s is None else s[keep]
    p = None if p is None else p[keep]
    if p is not None:
        rated = np.isfinite(y)
        if np.any(~np.isfinite(p[rated])) or np.any(p[rated] <= 0) or np.any(p > 1):
            raise ValueError("inclusion probabilities must be in (0, 1] for every rated unit")
    return f, y, s, p, dropped


def _z(confidence: float) -> float:
    return float(sps.norm.ppf(0.5 + check_confidence(confidence) / 2))


def _interval(value: float, var: float, z: float) -> tuple[float, float]:
    half = z * math.sqrt(max(var, 0.0))
    return (value - half, value + half)


def _join(*notes: str | None) -> str | None:
    kept = [n for n in notes if n]
    return "; ".join(kept) if kept else None


def _judge_only(f: np.ndarray, z: float) -> tuple[float | None, tuple[float, float] | None]:
    if f.size == 0:
        return None, None
    mean = float(f.mean())
    if f.size < 2:
        return mean, None
    return mean, _interval(mean, float(f.var(ddof=1)) / f.size, z)


# ----------------------------------------------------------------------------------------- PPI++


@dataclass(frozen=True)
class _Part:
    """One PPI estimate over a labelled set (y, fl) and an unlabelled set fu."""

    value: float
    var_human: float
    var_judge: float
    lam: float
    note: str | None = None


def tuned_lambda(y: np.ndarray, fl: np.ndarray, fu: np.ndarray) -> tuple[float, str | None]:
    """PPI++'s power-tuning weight for a mean: Cov(Y, f) / ((1 + n/N) Var(f)), clipped to [0, 1].

    Var(f) is taken over labelled and unlabelled judge outputs together. A judge that gives every unit
    the same output carries no information: the weight is 0 and the note says so.
    """
    n, big_n = y.size, fu.size
    both = np.concatenate([fl, fu])
    var_f = float(both.var(ddof=1)) if both.size > 1 else 0.0
    if var_f <= 0:
        return 0.0, "the judge gave every unit the same output: the estimate rests on the human ratings alone"
    cov = float(np.mean((y - y.mean()) * (fl - fl.mean())))
    lam = cov / ((1 + n / big_n) * var_f)
    return float(min(max(lam, 0.0), 1.0)), None


def _ppi_part(y: np.ndarray, fl: np.ndarray, fu: np.ndarray, lam: float | None) -> _Part:
    """PPI over one labelled/unlabelled split (n >= 2 and N >= 1 assumed)."""
    note = None
    if lam is None:
        lam, note = tuned_lambda(y, fl, fu)
    value = float(np.mean(lam * fu) + np.mean(y - lam * fl))
    var_judge = float(np.var(lam * fu)) / fu.size
    var_human = float(np.var(y - lam * fl)) / y.size
    return _Part(value, var_human, var_judge, float(lam), note)


def _human_part(y: np.ndarray) -> _Part:
    """Every judged unit of the split was rated: the humans' mean is the estimate."""
    return _Part(float(y.mean()), float(np.var(y)) / y.size, 0.0, 0.0, "every judged unit was rated by a human")


def _method(lam: float | None) -> str:
    if lam is None:
        return PPI_PLUS
    if lam == 0:
        return HUMAN_ONLY
    return PPI if lam == 1 else f"ppi (lambda={lam:g})"


def corrected_mean(
    judge: Any,
    human: Any,
    *,
    strata: Any = None,
    inclusion: Any = None,
    lam: float | None = None,
    confidence: float = 0.95,
) -> CorrectedEstimate:
    """The human-scale mean over all judged units, corrected for the judge's errors by the rated units.

    ``lam=None`` tunes the judge's weight (PPI++), ``lam=1`` is plain PPI, ``lam=0`` the human-only
    estimate. With ``strata`` each stratum is estimated on its own (its own tuned weight) and weighted by
    its share of the judged units; with ``inclusion`` rated units are weighted by 1/probability.
    """
    if lam is not None and not 0 <= lam <= 1:
        raise ValueError(f"lam must be in [0, 1] or None, got {lam}")
    z = _z(confidence)
    f, y, s, p, dropped = _prepare(judge, human, strata, inclusion)
    rated = np.isfinite(y)
    n, big_n = int(rated.sum()), int(f.size)
    judge_only, judge_ci = _judge_only(f, z)
    dropped_note = f"{dropped} unit(s) without a judge output left out" if dropped else None
    design = "stratified " if s is not None else "weighted " if p is not None else ""
    method = design + _method(lam)
    base: dict[str, Any] = {"judge_only": judge_only, "judge_only_ci": judge_ci, "n_human": n, "n_judged": big_n,
            "method": method, "confidence": confidence}  # fmt: skip
    if n == 0:
        return CorrectedEstimate(human_only=None, corrected=None, ci=None,
                                 note=_join("no human ratings of the judged units", dropped_note), **base)  # fmt: skip
    if n < 2:
        return CorrectedEstimate(human_only=float(y[rated].mean()), corrected=None, ci=None,
                                 note=_join("one human rating: no interval can be computed", dropped_note),
                                 **base)  # fmt: skip
    if p is not None:
        human_value, human_var, *_ = _ipw(f, y, p, 0.0)
        value, var_human, var_judge, used, note = _ipw(f, y, p, lam)
        lam_out: float | None = used
    elif s is not None:
        parts_h, parts, weights, why = _strata_parts(f, y, s, lam)
        if why is not None:
            return CorrectedEstimate(human_only=None, corrected=None, ci=None, note=_join(why, dropped_note), **base)
        human_value = float(sum(w * q.value for w, q in zip(weights, parts_h, strict=True)))
        human_var = float(sum(w * w * q.var_human for w, q in zip(weights, parts_h, strict=True)))
        value = float(sum(w * q.value for w, q in zip(weights, parts, strict=True)))
        var_human = float(sum(w * w * q.var_human for w, q in zip(weights, parts, strict=True)))
        var_judge = float(sum(w * w * q.var_judge for w, q in zip(weights, parts, strict=True)))
        lams = {q.lam for q in parts}
        lam_out = lams.pop() if len(lams) == 1 else None
        note = _join(*sorted({q.note for q in parts if q.note}))
    else:
        yl, fl, fu = y[rated], f[rated], f[~rated]
        h = _human_part(yl)
        human_value, human_var = h.value, h.var_human
        part = _ppi_part(yl, fl, fu, lam) if fu.size else h
        value, var_human, var_judge, lam_out, note = part.value, part.var_human, part.var_judge, part.lam, part.note
    return CorrectedEstimate(
        human_only=human_value,
        human_only_ci=_interval(human_value, human_var, z),
        corrected=value,
        ci=_interval(value, var_human + var_judge, z),
        lam=lam_out,
        var_human=var_human,
        var_judge=var_judge,
        note=_join(note, dropped_note),
        **base,
    )


def _strata_parts(
    f: np.ndarray, y: np.ndarray, s: np.ndarray, lam: float | None
) -> tuple[list[_Part], list[_Part], list[float], str | None]:
    """Per-stratum human-only and PPI parts and the strata's shares of the judged units."""
    labels = sorted({str(v) for v in s})
    keys = np.array([str(v) for v in s], dtype=object)
    short = []
    human_parts, parts, weights = [], [], []
    for label in labels:
        here = keys == label
        yh, fh = y[here], f[here]
        rated = np.isfinite(yh)
        if rated.sum() < 2:
            short.append(f"{label} ({int(rated.sum())})")
            continue
        h = _human_part(yh[rated])
        human_parts.append(h)
        parts.append(_ppi_part(yh[rated], fh[rated], fh[~rated], lam) if (~rated).any() else h)
        weights.append(here.sum() / f.size)
    if short:
        return [], [], [], "strata with fewer than 2 human ratings: " + ", ".join(short)
    return human_parts, parts, weights, None


def _ipw(
    f: np.ndarray, y: np.ndarray, p: np.ndarray, lam: float | None
) -> tuple[float, float, float, float, str | None]:
    """Inverse-probability-weighted PPI: each unit contributes lam f + rated (y - lam f) / p.

    Returns (value, var_human, var_judge, lam, note). The tuned lam minimises the variance of the
    per-unit terms; var_judge is the part left if every unit were rated, var(lam f) / N.
    """
    rated = np.isfinite(y)
    w = np.where(rated, 1.0 / np.where(rated, p, 1.0), 0.0)
    y0 = np.where(rated, y, 0.0)
    a = f * (1 - w)  # the judge's term: lam * a
    b = w * y0  # the humans' term
    note = None
    if lam is None:
        var_a = float(a.var(ddof=1))
        if var_a <= 0 or float(f.var()) <= 0:
            lam, note = 0.0, "the judge gave every unit the same output: the estimate rests on the human ratings alone"
        else:
            lam = min(max(-float(np.cov(a, b)[0, 1]) / var_a, 0.0), 1.0)
    terms = lam * a + b
    var_total = float(terms.var(ddof=1)) / f.size
    var_judge = min(float(np.var(lam * f)) / f.size, var_total)
    return float(terms.mean()), var_total - var_judge, var_judge, float(lam), note


def corrected_unsafe_rate(
    judge_unsafe: Any,
    human_unsafe: Any,
    *,
    strata: Any = None,
    inclusion: Any = None,
    confidence: float = 0.95,
) -> CorrectedEstimate:
    """The share of unsafe units, corrected by human ratings (PPI++).

    ``judge_unsafe``: 0/1 (or True/False) per judged unit, NaN where the judge gave no verdict.
    ``human_unsafe``: per unit the share of its raters who called it unsafe (0/1 for one rater), NaN where
    no human rated it. The bounds of the interval are clipped to [0, 1].
    """
    est = corrected_mean(judge_unsafe, human_unsafe, strata=strata, inclusion=inclusion, confidence=confidence)
    return _clip_rate(est)


def _clip_rate(est: CorrectedEstimate) -> CorrectedEstimate:
    def clip(ci: tuple[float, float] | None) -> tuple[float, float] | None:
        return None if ci is None else (max(0.0, ci[0]), min(1.0, ci[1]))

    corrected = est.corrected
    note = est.note
    if corrected is not None and not 0 <= corrected <= 1:
        corrected = min(max(corrected, 0.0), 1.0)
        note = _join(note, "the estimate fell outside [0, 1] and was clipped")
    return CorrectedEstimate(**{**asdict(est), "corrected": corrected, "ci": clip(est.ci), "note": note,
                                "judge_only_ci": clip(est.judge_only_ci),
                                "human_only_ci": clip(est.human_only_ci)})  # fmt: skip


# ----------------------------------------------------------------------------------------- Rogan-Gladen


def rogan_gladen(
    judge: Any,
    human: Any,
    *,
    strata: Any = None,
    inclusion: Any = None,
    confidence: float = 0.95,
) -> CorrectedEstimate:
    """The rate of positives corrected with the judge's sensitivity and specificity on the rated units.

    ``judge`` is 0/1 per judged unit; ``human`` 0/1 (or the share of raters saying 1) on the rated units,
    NaN elsewhere. Under a stratified or weighted design the sensitivity and specificity are weighted
    (N_h/n_h or 1/probability), since a sample drawn by the judge's verdict distorts them otherwise; their
    sample sizes are then the effective ones, (sum w)^2 / sum w^2. The judge's rate p is taken over all
    judged units, rated ones included. Estimate and interval are clipped to [0, 1] (the note says so).
    """
    z = _z(confidence)
    f, y, s, p, dropped = _prepare(judge, human, strata, inclusion)
    if np.any((f != 0) & (f != 1)):
        raise ValueError("rogan_gladen needs a 0/1 judge output")
    rated = np.isfinite(y)
    if np.any((y[rated] < 0) | (y[rated] > 1)):
        raise ValueError("rogan_gladen needs human values in [0, 1]")
    n_rated, big_n = int(rated.sum()), int(f.size)
    judge_only, judge_ci = _judge_only(f, z)
    dropped_note = f"{dropped} unit(s) without a judge output left out" if dropped else None
    design = "stratified " if s is not None else "weighted " if p is not None else ""
    base: dict[str, Any] = {"judge_only": judge_only, "judge_only_ci": judge_ci, "n_human": n_rated, "n_judged": big_n,
            "method": design + ROGAN_GLADEN, "confidence": confidence}  # fmt: skip

    def undefined(why: str, human_only: float | None = None) -> CorrectedEstimate:
        return CorrectedEstimate(human_only=human_only, corrected=None, ci=None, note=_join(why, dropped_note), **base)

    if n_rated == 0:
        return undefined("no human ratings of the judged units")
    w = _design_weights(f, y, s, p)[rated]
    yl, fl = y[rated], f[rated]
    human_only = float(np.sum(w * yl) / np.sum(w))
    pos, neg = w * yl, w * (1 - yl)
    if pos.sum() <= 0 or neg.sum() <= 0:
        which = "positive" if pos.sum() <= 0 else "negative"
        return undefined(f"no unit rated {which} by the humans: sensitivity or specificity unknown", human_only)
    q1 = float(np.sum(pos * fl) / pos.sum())
    q0 = float(np.sum(neg * (1 - fl)) / neg.sum())
    m1 = float(pos.sum() ** 2 / np.sum(pos**2))
    m0 = float(neg.sum() ** 2 / np.sum(neg**2))
    youden = q0 + q1 - 1
    if youden <= 0:
        return undefined(
            f"sensitivity {q1:.3f} + specificity {q0:.3f} <= 1: the judge is no better than chance on the rated "
            "units, so its rate cannot be corrected",
            human_only,
        )
    rate = float(f.mean())
    theta = (rate + q0 - 1) / youden
    var_test = rate * (1 - rate) / big_n / youden**2
    var_calib = ((1 - theta) ** 2 * q0 * (1 - q0) / m0 + theta**2 * q1 * (1 - q1) / m1) / youden**2
    var = var_test + var_calib
    note = None
    if not 0 <= theta <= 1:
        note = "the estimate fell outside [0, 1] and was clipped"
    lo, hi = _interval(theta, var, z)
    hv = human_only * (1 - human_only) / (np.sum(w) ** 2 / np.sum(w**2))
    h_lo, h_hi = _interval(human_only, hv, z)
    return CorrectedEstimate(
        human_only=human_only,
        human_only_ci=(max(0.0, h_lo), min(1.0, h_hi)),
        corrected=min(max(theta, 0.0), 1.0),
        ci=(max(0.0, lo), min(1.0, hi)),
        var_human=var_calib,
        var_judge=var_test,
        note=_join(note, dropped_note),
        **{**base, "judge_only_ci": None if judge_ci is None else (max(0.0, judge_ci[0]), min(1.0, judge_ci[1]))},
    )


def _design_weights(f: np.ndarray, y: np.ndarray, s: np.ndarray | None, p: np.ndarray | None) -> np.ndarray:
    """Per-unit sampling weights of the rated units: 1, N_h/n_h (strata) or 1/probability."""
    rated = np.isfinite(y)
    if p is not None:
        return np.where(rated, 1.0 / np.where(rated, p, 1.0), 0.0)
    w = np.ones(f.size)
    if s is not None:
        keys = np.array([str(v) for v in s], dtype=object)
        for label in set(keys):
            here = keys == label
            k = int((here & rated).sum())
            if k:
                w[here] = here.sum() / k
    return w
