"""The model unit (MentalAlign's): per response source, the mean human score against the mean judge score."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from mheval.analysis.agree.inputs import JudgeRows, aggregate_repeats
from mheval.analysis.agree.items import Boot, repeat_agreement
from mheval.analysis.agree.report import Block
from mheval.stats.correlation import bias as bias_estimate
from mheval.stats.icc import icc_bootstrap_ci, pairwise_icc
from mheval.stats.reliability import assess, human_range


def model_human_block(mat: pd.DataFrame, sources: pd.Series, dim: str | None, boot: Boot) -> tuple[Block, pd.DataFrame]:
    """The humans at model level: each rater's mean per source, and rater-vs-rater ICCs over sources."""
    item_src = sources.reindex(mat.index)
    has = item_src.notna().to_numpy()
    numeric = mat.astype(float)[has]
    groups = item_src[has].to_numpy()
    means = numeric.groupby(groups, sort=False).mean()  # per rater, over the items that rater scored
    rated = numeric.notna().any(axis=1).groupby(groups, sort=False).sum()
    order = [s for s in pd.unique(sources.to_numpy()) if s in means.index]
    means = means.reindex(order)
    pairwise = {
        "icc_c1": pairwise_icc(means, "C,1", **boot),
        "icc_a1": pairwise_icc(means, "A,1", **boot),
    }
    source_means = {s: {**{str(r): _opt(means.at[s, r]) for r in means.columns}, "items": int(rated[s])} for s in order}
    counts = {"items_used": int(rated.sum()), "items_without_source": int((~has).sum())}
    notes = () if has.all() else (f"{int((~has).sum())} human-labelled item(s) have no known response source: ignored",)
    block = Block(
        "humans",
        "human",
        dim,
        len(order),
        tuple(str(c) for c in mat.columns),
        pairwise,
        {},
        counts=counts,
        notes=notes,
        unit="model",
        sources=tuple(order),
        source_means=source_means,
    )
    return block, means


def _opt(x: Any) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def model_judge_block(
    jr: JudgeRows,
    mat: pd.DataFrame,
    rater_means: pd.DataFrame,
    sources: pd.Series,
    excluded: tuple[str, ...],
    dim: str | None,
    boot: Boot,
) -> Block:
    """One judge at model level: ICC(C,1), ICC(A,1) and bias over the sources' mean human vs mean judge."""
    per_item, _ = aggregate_repeats(jr.values, True)
    frame = pd.DataFrame(
        {
            "source": sources.reindex(mat.index).to_numpy(dtype=object),
            "h": mat.astype(float).mean(axis=1, skipna=True).to_numpy(),  # mean over the item's raters
            "j": per_item.reindex(mat.index).astype(float).to_numpy(),  # mean over the judge's ok repeats
        },
        index=mat.index,
    )
    both = frame[frame["source"].notna() & np.isfinite(frame["h"]) & np.isfinite(frame["j"])]
    own = both["source"].isin(excluded).to_numpy()
    used = both[~own]
    grouped = used.groupby("source", sort=False)
    h_means, j_means, n_items = grouped["h"].mean(), grouped["j"].mean(), grouped.size()
    candidates = [s for s in pd.unique(sources.to_numpy()) if s not in excluded]
    kept = [s for s in candidates if s in n_items.index]
    matrix = np.column_stack([h_means.reindex(kept).to_numpy(), j_means.reindex(kept).to_numpy()])
    stats = {
        "icc_c1": icc_bootstrap_ci(matrix, "C,1", **boot),
        "icc_a1": icc_bootstrap_ci(matrix, "A,1", **boot),
        "bias_vs_human_mean": bias_estimate(matrix[:, 1], matrix[:, 0], confidence=boot["confidence"]),
    }
    human_pairs = []
    if rater_means.shape[1] >= 2:  # human range over the same sources, point values only
        subset = rater_means.reindex(kept)
        human_pairs = [p.estimate for p in pairwise_icc(subset, "A,1", n_boot=0, seed=None).pairs]
    assessment = assess(jr.name, dim, "icc_a1", stats["icc_a1"], bias=stats["bias_vs_human_mean"])
    if human_pairs:
        assessment = replace(assessment, human=human_range(stats["icc_a1"], human_pairs))

    counts = dict(jr.counts)
    counts["items_judged"] = int(per_item.size)
    counts["items_matched"] = int(frame["j"].notna().sum())
    counts["items_without_human_labels"] = int(per_item.size) - counts["items_matched"]
    counts["items_used"] = len(used)
    counts["items_excluded_own_model"] = int(own.sum())
    counts["sources_without_pairs"] = [s for s in candidates if s not in n_items.index]
    counts["repeats"] = int(jr.values["repeat"].nunique()) if len(jr.values) else 0
    notes = []
    if counts["sources_without_pairs"]:
        notes.append(f"no item scored by both humans and judge for: {', '.join(counts['sources_without_pairs'])}")
    consistency = None
    if counts["repeats"] >= 2:
        mine = jr.values[jr.values["item"].map(sources).isin(kept).to_numpy()]
        consistency = repeat_agreement(mine, scale=True, labels=None, boot=boot)
    source_means = {s: {"human": float(h_means[s]), "judge": float(j_means[s]), "items": int(n_items[s])} for s in kept}
    return Block(
        jr.name,
        "judge",
        dim,
        len(kept),
        (jr.name, *rater_means.columns.astype(str)),
        {},
        stats,
        assessment,
        consistency,
        counts,
        tuple(notes),
        unit="model",
        sources=tuple(kept),
        excluded_sources=tuple(excluded),
        source_means=source_means,
    )
