"""The item unit: every rated item (case, or response) is one unit; humans among themselves, then each judge
against the humans over the same items, with the judge's self-consistency over its repeats."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from mheval.analysis.agree.inputs import JudgeRows, aggregate_repeats
from mheval.analysis.agree.report import Block
from mheval.stats.agreement import Pairwise, combine_pairs, fleiss_kappa, krippendorff_alpha, pairwise_kappa
from mheval.stats.consistency import repeat_consistency
from mheval.stats.correlation import bias as bias_estimate
from mheval.stats.correlation import diff_sumstat
from mheval.stats.icc import pairwise_icc
from mheval.stats.intervals import Estimate, is_missing
from mheval.stats.reliability import assess

_JUDGE_COL = "\x00judge"  # internal column name that cannot collide with a human rater's name


class Boot(TypedDict):
    """Bootstrap settings shared by every block, so that all of them see the same resamples."""

    n_boot: int
    seed: int | None
    confidence: float


def _scale_labels(values: np.ndarray, labels: Sequence[Any] | None) -> list[Any] | None:
    """For integer scales without explicit labels, the full range min..max so gaps still count."""
    if labels is not None:
        return list(labels)
    vals = values[~is_missing(values)].astype(float)
    if vals.size and np.all(vals == np.round(vals)):
        return list(range(int(vals.min()), int(vals.max()) + 1))
    return None


def _round_half_up(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x), np.nan, np.floor(x + 0.5))


def _block_stats(
    mat: pd.DataFrame,
    *,
    scale: bool,
    labels: Sequence[Any] | None,
    against: str | None,
    boot: Boot,
) -> tuple[dict[str, Pairwise], dict[str, Estimate]]:
    if scale:
        numeric = mat.astype(float)
        cat = numeric.apply(lambda c: _round_half_up(c.to_numpy()))
        cats = _scale_labels(cat.to_numpy(dtype=object), labels)
    else:
        numeric = None
        cat = mat
        cats = list(labels) if labels is not None else None
    pairwise = {"kappa": pairwise_kappa(cat, against=against, labels=cats, **boot)}
    stats = {
        "fleiss_kappa": fleiss_kappa(cat, labels=cats, **boot),
        "alpha": krippendorff_alpha(cat, "ordinal" if scale else "nominal", labels=cats, **boot),
    }
    if scale and numeric is not None:
        pairwise["weighted_kappa"] = pairwise_kappa(cat, against=against, weights="quadratic", labels=cats, **boot)
        pairwise["icc_a1"] = pairwise_icc(numeric, "A,1", against=against, **boot)
        cols = [str(c) for c in numeric.columns]
        pairs = (
            [(against, c) for c in cols if c != against]
            if against
            else [(a, b) for i, a in enumerate(cols) for b in cols[i + 1 :]]
        )
        for key, kind in (("mae", "mae"), ("bias", "bias"), ("within_1", "within")):
            named = [(a, b, diff_sumstat(numeric[a].to_numpy(), numeric[b].to_numpy(), kind)) for a, b in pairs]
            pairwise[key] = combine_pairs(key, named, **boot)
    return pairwise, stats


def _rename(pw: Pairwise, old: str, new: str) -> Pairwise:
    pairs = tuple(replace(p, a=new if p.a == old else p.a, b=new if p.b == old else p.b) for p in pw.pairs)
    return replace(pw, pairs=pairs)


def leave_out(jr: JudgeRows, sources: pd.Series, excluded: tuple[str, ...]) -> JudgeRows:
    """Item unit: drop the judge's values on responses of its own family, and say what was kept."""
    src = jr.values["item"].map(sources)
    own = src.isin(excluded).to_numpy()
    counts = {
        **jr.counts,
        "judged_sources": list(dict.fromkeys(src.dropna())),
        "excluded_sources": list(excluded),
        "values_excluded_own_model": int(own.sum()),
        "items_excluded_own_model": int(jr.values["item"][own].nunique()),
    }
    return JudgeRows(jr.name, jr.values[~own].reset_index(drop=True), counts)


def judge_block(
    jr: JudgeRows,
    mat: pd.DataFrame,
    hblock: Block,
    *,
    scale: bool,
    dim: str | None,
    labels: Sequence[Any] | None,
    boot: Boot,
) -> Block:
    per_item, ties = aggregate_repeats(jr.values, scale)
    counts = dict(jr.counts)
    judged_items = set(per_item.index)
    counts["items_judged"] = len(judged_items)
    counts["items_matched"] = len(judged_items & set(mat.index))
    counts["items_without_human_labels"] = len(judged_items - set(mat.index))
    counts["repeats"] = int(jr.values["repeat"].nunique()) if len(jr.values) else 0
    if not scale:
        counts["majority_ties"] = ties
    notes = []
    if counts["items_without_human_labels"]:
        notes.append(f"{counts['items_without_human_labels']} judged item(s) have no human labels: ignored")
    if scale and dim is not None and not len(jr.values):
        notes.append(f"no ok judgment has a score for {dim!r}")

    aligned = per_item.reindex(mat.index)
    both = mat.copy()
    both.insert(0, _JUDGE_COL, aligned.astype(float) if scale else aligned.astype(object))
    pw, st = _block_stats(both, scale=scale, labels=labels, against=_JUDGE_COL, boot=boot)
    pw = {k: _rename(v, _JUDGE_COL, jr.name) for k, v in pw.items()}
    headline = "icc_a1" if scale else "kappa"

    bias = None
    if scale:
        human_mean = mat.astype(float).mean(axis=1, skipna=True)
        bias = bias_estimate(aligned.astype(float).to_numpy(), human_mean.to_numpy(), confidence=boot["confidence"])
        st["bias_vs_human_mean"] = bias
    human_pairs = [p.estimate for p in hblock.pairwise[headline].pairs]
    assessment = assess(jr.name, dim, headline, pw[headline].mean, bias=bias, human=human_pairs)

    consistency = repeat_agreement(jr.values, scale=scale, labels=labels, boot=boot) if counts["repeats"] >= 2 else None
    left = tuple(counts.pop("excluded_sources", ()))
    judged = counts.pop("judged_sources", [])
    return Block(
        jr.name,
        "judge",
        dim,
        len(mat),
        (jr.name, *hblock.raters),
        pw,
        st,
        assessment,
        consistency,
        counts,
        tuple(notes),
        sources=tuple(s for s in judged if s not in left),
        excluded_sources=left,
    )


def human_block(mat: pd.DataFrame, *, scale: bool, dim: str | None, labels: Sequence[Any] | None, boot: Boot) -> Block:
    """The humans among themselves over their items x raters matrix."""
    pw, st = _block_stats(mat, scale=scale, labels=labels, against=None, boot=boot)
    ratings = int((~is_missing(mat.to_numpy(dtype=object))).sum())
    return Block(
        "humans", "human", dim, len(mat), tuple(str(c) for c in mat.columns), pw, st, counts={"ratings": ratings}
    )


def repeat_agreement(values: pd.DataFrame, *, scale: bool, labels: Sequence[Any] | None, boot: Boot) -> Estimate:
    """A judge's self-consistency over its values (item, repeat, value): ICC(A,1) for scales, else Fleiss' kappa."""
    rep = values.pivot_table(index="item", columns="repeat", values="value", aggfunc="first")
    return repeat_consistency(rep, categorical=not scale, labels=labels, **boot).agreement
