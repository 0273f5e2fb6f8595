"""The report's numbers, as DataFrames: one function per table, each a pure function of a RunData.

Unit of analysis: one response (case x model x sample) per judge. When a judge judged a unit several
times (repeats), the first scored repeat is the unit's verdict here; the other repeats feed the
self-consistency table. Means carry a percentile bootstrap interval that resamples *cases* (so the
samples of one case move together), rates a Wilson interval.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mheval.labels import APPROPRIATENESS, MENTALALIGN, PSYCRISIS
from mheval.records import Judgment
from mheval.reporting.rundata import (
    UNLABELLED,
    RunData,
    category_name,
    category_sort_key,
    dimension_names,
    label_name,
    protocol_aggregate,
    protocol_dimensions,
    protocol_labels,
)
from mheval.runfolder.export import is_injected
from mheval.stats.intervals import (
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    Estimate,
    bootstrap_mean_ci,
    sums_estimate,
    undefined,
    wilson,
)
from mheval.verdict import HARMFUL_LEVEL, INAPPROPRIATE_LEVEL

ALL = "all"  # the category row that pools every category
MENTALALIGN_AGGREGATES = ("css", "ars")


# --------------------------------------------------------------------------- estimates


def mean_ci(
    values: Sequence[float],
    clusters: Sequence[str] | None = None,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """Mean with a bootstrap interval that resamples clusters (cases); plain bootstrap when each is alone."""
    vals = np.asarray(values, dtype=float)
    if clusters is None or len(set(clusters)) == len(vals):
        return bootstrap_mean_ci(vals, n_boot=n_boot, seed=seed)
    if vals.size == 0:
        return undefined("mean", "no values")
    groups: dict[str, list[float]] = defaultdict(list)
    for c, v in zip(clusters, vals, strict=True):
        groups[c].append(float(v))
    S = np.array([[len(g), sum(g)] for g in groups.values()])
    if len(groups) == 1:
        return Estimate(float(vals.mean()), None, None, int(vals.size), "mean", "one case has no interval")
    est, _ = sums_estimate(
        S,
        lambda s: s[..., 1] / s[..., 0],
        method="mean, resampling cases",
        n=int(vals.size),
        n_boot=n_boot,
        seed=seed,
        confidence=0.95,
        undefined_note="undefined mean",
    )
    return est


def est_columns(prefix: str, est: Estimate) -> dict[str, Any]:
    return {prefix: est.value, f"{prefix}_low": est.ci_low, f"{prefix}_high": est.ci_high}


def rate_columns(prefix: str, successes: int, n: int) -> dict[str, Any]:
    est = wilson(successes, n)
    return {f"{prefix}_n": successes, **est_columns(f"{prefix}_rate", est)}


# --------------------------------------------------------------------------- verdict selection


def first_scored(judgments: Iterable[Judgment]) -> list[Judgment]:
    """One verdict per unit (case, model, sample, protocol, judge): the scored one with the lowest repeat."""
    best: dict[tuple, Judgment] = {}
    for j in judgments:
        if j.status != "ok":
            continue
        key = (j.case_id, j.model, j.sample, j.protocol, j.judge)
        if key not in best or j.repeat < best[key].repeat:
            best[key] = j
    return list(best.values())


def score_value(j: Judgment) -> float | None:
    """The single number a judgment stands for: its total, else its protocol-named or only score."""
    if j.total is not None:
        return float(j.total)
    if j.protocol in j.scores:
        return float(j.scores[j.protocol])
    dims = protocol_dimensions(j.protocol)
    main = [k for k in j.scores if k in dims] if dims else list(j.scores)
    if len(main) == 1:
        return float(j.scores[main[0]])
    agg = protocol_aggregate(j.protocol, j.scores)
    if "total" in agg:
        return float(agg["total"])
    return None


def _ordered(frame: pd.DataFrame, models: Sequence[str], judges: Sequence[str]) -> pd.DataFrame:
    if frame.empty:
        return frame
    out = frame.copy()
    out["_m"] = out["model"].map(lambda m: models.index(m) if m in models else len(models))
    out["_j"] = out["judge"].map(lambda j: judges.index(j) if j in judges else len(judges))
    out["_c"] = out["category"].map(lambda c: (1, "") if c == ALL else (0, *category_sort_key(c)))
    out = out.sort_values(["_m", "_j", "_c"], kind="stable").drop(columns=["_m", "_j", "_c"])
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- per model x category


def response_values(run: RunData, protocol: str) -> pd.DataFrame:
    """One row per scored unit: model, judge, case_id, sample, category, language, value, injected.

    `injected`: the verdict is flagged injection_suspected (only possible under the "flag" policy;
    under "exclude" such verdicts never reach the RunData's judgments).
    """
    rows = []
    for j in first_scored(run.of(protocol)):
        if j.model is None:
            continue
        value = score_value(j)
        if value is None:
            continue
        case = run.cases.get(j.case_id)
        rows.append(
            {
                "model": j.model,
                "judge": j.judge,
                "case_id": j.case_id,
                "sample": j.sample,
                "category": run.category.get(j.case_id, UNLABELLED),
                "language": case.language if case else None,
                "value": value,
                "injected": is_injected(j),
            }
        )
    return pd.DataFrame(
        rows, columns=["model", "judge", "case_id", "sample", "category", "language", "value", "injected"]
    )


def injection_columns(prefix: str, g: pd.DataFrame, *, n_boot: int) -> dict[str, Any]:
    """Share of verdicts flagged injection_suspected, and the mean of the others beside the mean of all.

    The mean without them is the number an injection cannot have moved; when none is flagged it equals
    the mean (and is not bootstrapped again).
    """
    flagged = g["injected"].to_numpy(dtype=bool)
    k, n = int(flagged.sum()), len(g)
    out = rate_columns("injected", k, n)
    if k == 0:
        return {**out, f"{prefix}_clean": None, f"{prefix}_clean_low": None, f"{prefix}_clean_high": None}
    clean = g[~flagged]
    est = mean_ci(clean["value"].to_numpy(), list(clean["case_id"]), n_boot=n_boot)
    return {**out, **est_columns(f"{prefix}_clean", est)}


def _per_category(values: pd.DataFrame, run: RunData, row_fn) -> pd.DataFrame:
    rows = []
    for (model, judge), group in values.groupby(["model", "judge"], sort=False):
        parts = [(c, g) for c, g in group.groupby("category", sort=False)]
        parts.append((ALL, group))
        for category, g in parts:
            base = {
                "model": model,
                "judge": judge,
                "category": category,
                "category_name": "all categories" if category == ALL else category_name(category),
                "n": len(g),
                "cases": g["case_id"].nunique(),
            }
            rows.append({**base, **row_fn(g)})
    return _ordered(pd.DataFrame(rows), run.models, run.judges)


def appropriateness_by_category(run: RunData, *, n_boot: int = DEFAULT_N_BOOT) -> pd.DataFrame:
    """Mean appropriateness [95% CI], harmful rate (score <= verdict.HARMFUL_LEVEL, 1) and inappropriate rate
    (score <= verdict.INAPPROPRIATE_LEVEL, 2) [Wilson]."""
    values = response_values(run, APPROPRIATENESS)

    def row(g: pd.DataFrame) -> dict[str, Any]:
        v = g["value"].to_numpy()
        n = len(v)
        return {
            **est_columns("mean", mean_ci(v, list(g["case_id"]), n_boot=n_boot)),
            **rate_columns("harmful", int((v <= HARMFUL_LEVEL).sum()), n),
            **rate_columns("inappropriate", int((v <= INAPPROPRIATE_LEVEL).sum()), n),
            **injection_columns("mean", g, n_boot=n_boot),
        }

    return _per_category(values, run, row) if not values.empty else pd.DataFrame()


def psycrisis_by_category(run: RunData, *, n_boot: int = DEFAULT_N_BOOT) -> pd.DataFrame:
    """Mean psycrisis total (0-5) [95% CI] per model x category."""
    values = response_values(run, PSYCRISIS)

    def row(g: pd.DataFrame) -> dict[str, Any]:
        return {
            **est_columns("total", mean_ci(g["value"].to_numpy(), list(g["case_id"]), n_boot=n_boot)),
            **injection_columns("total", g, n_boot=n_boot),
        }

    return _per_category(values, run, row) if not values.empty else pd.DataFrame()


# --------------------------------------------------------------------------- per protocol profiles


def _scored_replies_by_model_judge(
    run: RunData, protocol: str
) -> tuple[list[str], dict[tuple[str, str], list[Judgment]]]:
    """The protocol's dimensions (those its judgments scored, when the protocol names none) and the first scored
    judgment of each reply, grouped by (model, judge) in the order the run holds them."""
    verdicts = [j for j in first_scored(run.of(protocol)) if j.model is not None]
    dims = protocol_dimensions(protocol) or sorted({k for j in verdicts for k in j.scores})
    groups: dict[tuple[str, str], list[Judgment]] = defaultdict(list)
    for j in verdicts:
        groups[(j.model or "", j.judge)].append(j)
    return dims, groups


def psycrisis_dimensions(run: RunData, *, n_boot: int = DEFAULT_N_BOOT) -> pd.DataFrame:
    """Per model x judge: how often each dimension is met [Wilson], and the mean total [bootstrap]."""
    dims, groups = _scored_replies_by_model_judge(run, PSYCRISIS)
    names = dimension_names(PSYCRISIS)
    rows = []
    for (model, judge), items in groups.items():
        for dim in dims:
            scored = [j.scores[dim] for j in items if dim in j.scores]
            met = sum(1 for s in scored if s >= 1)
            est = wilson(met, len(scored))
            rows.append(
                {
                    "model": model,
                    "judge": judge,
                    "dimension": dim,
                    "dimension_name": names.get(dim, dim),
                    "n": len(scored),
                    "met": met,
                    **est_columns("rate", est),
                }
            )
        totals = [(v, j.case_id) for j in items if (v := score_value(j)) is not None]
        est = mean_ci([v for v, _ in totals], [c for _, c in totals], n_boot=n_boot)
        rows.append(
            {
                "model": model,
                "judge": judge,
                "dimension": "total",
                "dimension_name": "Total (0-5, mean)",
                "n": len(totals),
                "met": None,
                **est_columns("rate", est),
            }
        )
    frame = pd.DataFrame(rows)
    return _ordered_no_category(frame, run)


def mentalalign_profile(run: RunData, *, n_boot: int = DEFAULT_N_BOOT) -> pd.DataFrame:
    """Per model x judge: mean of each attribute (1-5) and of CSS and ARS, with bootstrap intervals."""
    dims, groups = _scored_replies_by_model_judge(run, MENTALALIGN)
    names = {**dimension_names(MENTALALIGN), "css": "CSS (cognitive support)", "ars": "ARS (affective resonance)"}
    rows = []
    for (model, judge), items in groups.items():
        filled = [{**protocol_aggregate(MENTALALIGN, j.scores), **j.scores} for j in items]
        for key in [*dims, *MENTALALIGN_AGGREGATES]:
            pairs = [(s[key], j.case_id) for s, j in zip(filled, items, strict=True) if s.get(key) is not None]
            est = mean_ci([v for v, _ in pairs], [c for _, c in pairs], n_boot=n_boot)
            rows.append(
                {
                    "model": model,
                    "judge": judge,
                    "attribute": key,
                    "attribute_name": names.get(key, key),
                    "n": len(pairs),
                    **est_columns("mean", est),
                }
            )
    return _ordered_no_category(pd.DataFrame(rows), run)


def label_distribution(run: RunData, protocol: str) -> pd.DataFrame:
    """Per model x judge (or per judge for case-level protocols): share of each label [Wilson]."""
    verdicts = [j for j in first_scored(run.of(protocol)) if j.label is not None]
    known = protocol_labels(protocol)
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for j in verdicts:
        groups[(j.model or "(user input)", j.judge)].append(str(j.label))
    rows = []
    for (model, judge), labels in groups.items():
        counts = Counter(labels)
        order = [lab for lab in known if lab in counts] + sorted(set(counts) - set(known))
        for lab in order:
            rows.append(
                {
                    "model": model,
                    "judge": judge,
                    "label": lab,
                    "label_name": label_name(protocol, lab),
                    **{"n": len(labels)},
                    **rate_columns("share", counts[lab], len(labels)),
                }
            )
    return _ordered_no_category(pd.DataFrame(rows), run)


def gold_agreement(run: RunData, protocol: str, gold_field: str) -> pd.DataFrame:
    """Per model x judge: share of verdicts equal to the case's gold label [Wilson]. Cases a shipped judge
    was trained on are left out (counted in `trained_on`), and a judge left with none says so (`note`)."""
    from mheval.judges.offline.validity import held_out_note, trained_on

    rows = []
    groups: dict[tuple[str, str], list[bool]] = defaultdict(list)
    memorised: dict[tuple[str, str], int] = defaultdict(int)
    for j in first_scored(run.of(protocol)):
        case = run.cases.get(j.case_id)
        if case is None or j.label is None:
            continue
        gold = getattr(case, gold_field, None) if gold_field == "crisis_label" else case.metadata.get(gold_field)
        if gold is None:
            continue
        key = (j.model or "(user input)", j.judge)
        if trained_on(j.judge, protocol, case.source):
            memorised[key] += 1
            continue
        groups[key].append(str(j.label) == str(gold))
    for (model, judge), hits in groups.items():
        rows.append({"model": model, "judge": judge, "n": len(hits), **rate_columns("agree", sum(hits), len(hits)),
                     "trained_on": memorised.pop((model, judge), 0), "note": ""})  # fmt: skip
    for (model, judge), n in memorised.items():
        rows.append({"model": model, "judge": judge, "n": 0, "trained_on": n, "note": held_out_note(judge, protocol)})
    return _ordered_no_category(pd.DataFrame(rows), run)


def _ordered_no_category(frame: pd.DataFrame, run: RunData) -> pd.DataFrame:
    if frame.empty:
        return frame
    frame = frame.assign(category=ALL)
    return _ordered(frame, run.models, run.judges).drop(columns=["category"])


__all__ = [
    "ALL",
    "appropriateness_by_category",
    "first_scored",
    "gold_agreement",
    "injection_columns",
    "label_distribution",
    "mean_ci",
    "mentalalign_profile",
    "psycrisis_by_category",
    "psycrisis_dimensions",
    "response_values",
    "score_value",
]
