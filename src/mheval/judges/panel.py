"""Panels of judges, self-consistency across repeats, and which judges may judge which models.

`aggregate_panel(judgments, method)` turns several judges' verdicts on one unit into one judgment,
named `panel:<method>`:

- `majority`: the most frequent label, or per dimension the most frequent score;
- `mean` / `median`: per dimension, the mean or median of the members' scores (scale protocols only;
  the median of an even number of scores is the mean of the middle two, so it may fall between levels).

Ties are resolved towards caution, and flagged `panel_tie:<label or dimension>`: for labels, the tied
label listed first in the protocol wins (both built-in label protocols list their no-risk label last,
so a crisis beats `no_crisis` and an unsafe category beats `safe`); for scores, the
lowest tied score wins (a binary tie counts as not met). Unscored members are left out and counted
(`panel_unscored:<n>` beside `panel_members:<n>`); when every member is unscored the panel is unscored
with the most common reason of its members.

`self_consistency(judgments)` measures how much one judge's repeats of the same unit agree (computed by
stats/consistency.py). Which judge may judge which model (self-preference) is models/families.py.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from mheval.records import Judgment, Reason, Usage
from mheval.stats.consistency import FLEISS, ICC_A1, repeat_consistency, unit_consistency
from mheval.stats.intervals import is_missing

if TYPE_CHECKING:
    from mheval.protocols.spec import ProtocolSpec

PanelMethod = Literal["majority", "mean", "median"]
PANEL_METHODS: tuple[str, ...] = ("majority", "mean", "median")
PANEL_PREFIX = "panel:"

UnitKey = tuple[str, str | None, int | None, str]


def unit_key(j: Judgment) -> UnitKey:
    """The unit a judgment is about, whoever judged it: (case, model, sample, protocol)."""
    return (j.case_id, j.model, j.sample, j.protocol)


def _spec(protocol: str) -> ProtocolSpec | None:
    from mheval.errors import InputError
    from mheval.protocols.spec import load_protocol

    try:
        return load_protocol(protocol)
    except InputError:
        return None


def _vote(values: list[float]) -> tuple[float, bool]:
    """The most frequent value; on a tie the lowest (the cautious reading of a higher-is-better scale)."""
    counts = Counter(values)
    top = max(counts.values())
    tied = sorted(v for v, c in counts.items() if c == top)
    return tied[0], len(tied) > 1


def _label_vote(labels: list[str], order: Sequence[str]) -> tuple[str, bool]:
    counts = Counter(labels)
    top = max(counts.values())
    tied = [lb for lb, c in counts.items() if c == top]
    if len(tied) == 1:
        return tied[0], False
    rank = {lb: i for i, lb in enumerate(order)}
    first_seen = {lb: i for i, lb in reversed(list(enumerate(labels)))}
    return min(tied, key=lambda lb: (rank.get(lb, len(rank)), first_seen[lb])), True


def aggregate_panel(
    judgments: Sequence[Judgment], method: PanelMethod | str = "majority", spec: ProtocolSpec | None = None
) -> Judgment:
    """One judgment from several judges' judgments of the same unit (see the module docstring).

    All members must share case, model, sample and protocol; the panel's repeat is theirs when they
    agree on it, else 0. `spec` defaults to the built-in protocol of that id (for the label order and
    the aggregates such as total, css and ars). Raises ValueError for an empty panel, mixed units, an
    unknown method, or mean/median over labels.
    """
    if method not in PANEL_METHODS:
        raise ValueError(f"unknown panel method {method!r}; choose one of {', '.join(PANEL_METHODS)}")
    if not judgments:
        raise ValueError("a panel needs at least one judgment")
    units = {unit_key(j) for j in judgments}
    if len(units) > 1:
        raise ValueError(f"a panel aggregates one unit, got {len(units)} (e.g. {sorted(map(str, units))[:2]})")
    first = judgments[0]
    spec = spec if spec is not None else _spec(first.protocol)
    repeats = {j.repeat for j in judgments}
    ids = {
        "case_id": first.case_id, "protocol": first.protocol, "judge": PANEL_PREFIX + method,
        "model": first.model, "sample": first.sample, "repeat": repeats.pop() if len(repeats) == 1 else 0,
    }  # fmt: skip
    usage = sum((j.usage for j in judgments), Usage())
    latency = max(j.latency_s for j in judgments)
    scored = [j for j in judgments if j.status == "ok"]
    unscored = [j for j in judgments if j.status != "ok"]
    members = ", ".join(f"{j.judge}" + ("" if j.status == "ok" else f" (unscored: {j.reason})") for j in judgments)
    flags = [f"panel_members:{len(judgments)}", f"panel_unscored:{len(unscored)}"]
    if not scored:
        kind = Counter(j.reason or Reason.PARSE_FAILURE for j in unscored).most_common(1)[0][0]
        return Judgment.unscored(
            kind,
            f"all {len(judgments)} panel members unscored ({members})",
            usage=usage,
            latency_s=latency,
            flags=flags,
            **ids,
        )

    is_label = any(j.label is not None for j in scored)
    rationale = f"{method} of {len(scored)} scored judgment(s) from: {members}"
    if is_label:
        if method != "majority":
            raise ValueError(f"method {method!r} needs scores; labels are aggregated by majority")
        labels = [j.label for j in scored if j.label is not None]
        label, tie = _label_vote(labels, (spec.labels if spec is not None else None) or [])
        if tie:
            flags.append("panel_tie:label")
        votes = Counter(labels)
        rationale += "; votes " + ", ".join(f"{k} {v}" for k, v in votes.most_common())
        return Judgment(label=label, rationale=rationale, flags=flags, usage=usage, latency_s=latency, **ids)

    dims = spec.dimensions if spec is not None else sorted({k for j in scored for k in j.scores})
    aggregate_keys = set(spec.aggregates) if spec is not None else set()
    scores: dict[str, float] = {}
    for dim in dims:
        if dim in aggregate_keys:
            continue
        values = [j.scores[dim] for j in scored if dim in j.scores]
        if not values:
            continue
        if method == "majority":
            scores[dim], tie = _vote(values)
            if tie:
                flags.append(f"panel_tie:{dim}")
        elif method == "mean":
            scores[dim] = float(np.mean(values))
        else:
            scores[dim] = float(statistics.median(values))
    total = None
    if spec is not None:
        aggregates = spec.aggregate(scores)
        total = aggregates.pop("total", None)
        scores.update(aggregates)
    evidence: dict[str, list[str]] = {}
    for j in scored:
        for dim, quotes in j.evidence.items():
            bucket = evidence.setdefault(dim, [])
            bucket.extend(q for q in quotes if q not in bucket)
    return Judgment(
        scores=scores,
        total=total,
        evidence=evidence,
        rationale=rationale,
        flags=flags,
        usage=usage,
        latency_s=latency,
        **ids,
    )


def build_panels(
    judgments: Iterable[Judgment], methods: Sequence[str], judges: Sequence[str] | None = None
) -> list[Judgment]:
    """Panel judgments for every unit and repeat judged by two or more of `judges` (default: all but panels)."""
    groups: dict[tuple[UnitKey, int], list[Judgment]] = defaultdict(list)
    wanted = set(judges) if judges is not None else None
    for j in judgments:
        if j.judge.startswith(PANEL_PREFIX) or (wanted is not None and j.judge not in wanted):
            continue
        groups[(unit_key(j), j.repeat)].append(j)
    out = []
    for members in groups.values():
        if len({j.judge for j in members}) < 2:
            continue
        for method in methods:
            if method != "majority" and any(j.label is not None for j in members):
                continue  # mean/median do not apply to labels
            out.append(aggregate_panel(members, method))
    return out


# -- self-consistency -------------------------------------------------------------------------------

_SC_COLUMNS = [
    "case_id",
    "model",
    "sample",
    "protocol",
    "judge",
    "dimension",
    "n_repeats",
    "n_scored",
    "n_unscored",
    "mean",
    "std",
    "min",
    "max",
    "modal",
    "agree",
]
_SUMMARY_COLUMNS = [
    "protocol",
    "judge",
    "dimension",
    "units",
    "mean_std",
    "mean_agree",
    "all_agree",
    "fleiss_kappa",
    "icc_a1",
]


def _repeat_matrices(judgments: Iterable[Judgment]) -> dict[tuple[str, str, str], pd.DataFrame]:
    """Per (protocol, judge, dimension): a units x repeats matrix of the scored values.

    The dimension is "label" for labels, else each score key and "total"; rows are unit keys.
    """
    cells: dict[tuple[str, str, str], dict[UnitKey, dict[int, object]]] = defaultdict(lambda: defaultdict(dict))
    for j in judgments:
        if j.status != "ok":
            continue
        values: dict[str, object] = {"label": j.label} if j.label is not None else {}
        values.update(j.scores)
        if j.total is not None:
            values["total"] = j.total
        for dim, v in values.items():
            cells[(j.protocol, j.judge, dim)][unit_key(j)][j.repeat] = v
    out = {}
    for key, units in cells.items():
        repeats = sorted({r for reps in units.values() for r in reps})
        rows = [[reps.get(r) for r in repeats] for reps in units.values()]
        out[key] = pd.DataFrame(rows, index=pd.Index(list(units), tupleize_cols=False), columns=repeats, dtype=object)
    return out


def self_consistency(judgments: Iterable[Judgment]) -> pd.DataFrame:
    """One row per (unit, judge, dimension) over the judge's repeats of that unit.

    `dimension` is "label" for label protocols, else each score key (and "total"). For numbers: mean,
    sample standard deviation (NaN with fewer than two scored repeats), min, max. For every kind:
    `modal` (the most frequent value; a tie goes to the earliest repeat) and `agree`, the share of
    scored repeats that give it (1.0 = perfectly consistent). Unscored repeats are counted, not used.
    """
    judgments = list(judgments)
    counts: dict[tuple[UnitKey, str], list[int]] = defaultdict(lambda: [0, 0])  # judgments, unscored
    for j in judgments:
        tally = counts[(unit_key(j), j.judge)]
        tally[0] += 1
        tally[1] += j.status != "ok"
    per_dim: dict[tuple[UnitKey, str], list[dict[str, object]]] = defaultdict(list)
    for (_, judge, dim), matrix in _repeat_matrices(judgments).items():
        detail = unit_consistency(matrix, numeric=dim != "label")
        for unit, row in zip(detail.index, detail.to_dict("records"), strict=True):
            per_dim[(unit, judge)].append(
                {
                    "dimension": dim,
                    "n_scored": row["n"],
                    "modal": row["modal"],
                    "agree": row["modal_share"],
                    **{k: row[k] for k in ("mean", "std", "min", "max")},
                }
            )
    rows: list[dict[str, object]] = []
    for (unit, judge), (n, unscored) in counts.items():
        case_id, model, sample, protocol = unit
        base = {
            "case_id": case_id,
            "model": model,
            "sample": sample,
            "protocol": protocol,
            "judge": judge,
            "n_repeats": n,
            "n_unscored": unscored,
        }
        dims = per_dim.get((unit, judge)) or [{"dimension": None, "n_scored": n - unscored}]
        rows.extend({**base, **d} for d in dims)
    return pd.DataFrame(rows, columns=_SC_COLUMNS)


def self_consistency_summary(judgments: Sequence[Judgment], *, n_boot: int = 0) -> pd.DataFrame:
    """Per (protocol, judge, dimension), over the units with 2+ scored repeats: their count, mean std,
    mean agreement, share where every repeat agrees, and Fleiss' kappa over repeats for labels and binary
    dimensions or ICC(A,1) for other numbers (`mheval.stats.consistency.repeat_consistency`)."""
    rows = []
    for (protocol, judge, dim), matrix in sorted(_repeat_matrices(judgments).items(), key=lambda kv: kv[0]):
        cells = matrix.to_numpy(dtype=object)
        categorical = dim == "label" or set(cells[~is_missing(cells)]) <= {0.0, 1.0}
        c = repeat_consistency(matrix, categorical=categorical, n_boot=n_boot)
        if not c.units:
            continue
        value = c.agreement.value if c.agreement.value is not None else float("nan")
        rows.append(
            {
                "protocol": protocol,
                "judge": judge,
                "dimension": dim,
                "units": c.units,
                "mean_std": c.mean_std if c.mean_std is not None else float("nan"),
                "mean_agree": c.modal_share,
                "all_agree": c.identical_share,
                "fleiss_kappa": value if c.statistic == FLEISS else float("nan"),
                "icc_a1": value if c.statistic == ICC_A1 else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=_SUMMARY_COLUMNS)


__all__ = [
    "PANEL_METHODS",
    "PANEL_PREFIX",
    "PanelMethod",
    "aggregate_panel",
    "build_panels",
    "self_consistency",
    "self_consistency_summary",
    "unit_key",
]
