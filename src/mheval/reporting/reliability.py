"""Can we trust the judge? Agreement with human labels, self-consistency across repeats, ungrounded judgments.

Human labels come from a `human_labels.*` file in the run folder (any shape `load_human_labels`
reads) or from the cases themselves (`metadata["human_labels"]`, as the help-harm reader keeps them).
Which protocol they rate is inferred: labels go to the label protocol whose label set holds them,
numbers to the protocol whose dimensions they name (or to `appropriateness` when they name none). A
file rates responses when it has a `model` column (and optionally `sample`): only those responses'
judgments are compared.
Anything that cannot be matched is said in a note, never guessed silently.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pandas as pd

from mheval.errors import InputError
from mheval.judges.grounding import UNGROUNDED, ungrounded_rate
from mheval.labels import APPROPRIATENESS
from mheval.records import Judgment, Reason
from mheval.reporting.metrics import est_columns, rate_columns, score_value
from mheval.reporting.rundata import RunData, protocol_dimensions, protocol_labels
from mheval.reporting.ungrounded import UNGROUNDED_CLAIMS, UNGROUNDED_JUDGMENTS
from mheval.runfolder.export import judgment_row
from mheval.stats.consistency import repeat_consistency

LABEL_FILE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".json")

AGREEMENT_COLUMNS = [
    "source",
    "protocol",
    "dimension",
    "block",
    "kind",
    "items",
    "statistic",
    "value",
    "value_low",
    "value_high",
    "verdict",
    "vs_humans",
    "leniency",
    "self_consistency",
    "unscored",
]


# --------------------------------------------------------------------------- human labels


def rated_responses(path: Path) -> set[tuple[str, str, int]] | None:
    """The (case id, model, sample) a labels file names in `model`/`sample` columns, or None without them.

    `load_human_labels` keeps only id, rater, value and dimension; this says which responses were rated,
    so that the judgments of the other models' responses to the same case are left out.
    """
    try:
        if path.suffix in (".csv", ".tsv"):
            frame = pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",", dtype=str)
        elif path.suffix in (".jsonl", ".ndjson"):
            frame = pd.read_json(path, lines=True, dtype=False)
        else:
            frame = pd.read_json(path, dtype=False)
    except ValueError:
        return None
    if "model" not in frame.columns or "id" not in frame.columns:
        return None
    samples = frame["sample"] if "sample" in frame.columns else pd.Series(0, index=frame.index)
    return {
        (str(i), str(m), int(float(s)) if pd.notna(s) and str(s).strip() else 0)
        for i, m, s in zip(frame["id"], frame["model"], samples, strict=True)
        if pd.notna(m)
    }


def human_label_sources(run: RunData) -> list[tuple[str, pd.DataFrame, set[tuple[str, str, int]] | None]]:
    """(where, long table, rated responses or None) per source of human labels; bad files raise InputError."""
    from mheval.analysis.labels import load_human_labels

    sources: list[tuple[str, pd.DataFrame, set[tuple[str, str, int]] | None]] = []
    for suffix in LABEL_FILE_SUFFIXES:
        path = Path(run.run_dir) / f"human_labels{suffix}"
        if path.is_file():
            sources.append((path.name, load_human_labels(path), rated_responses(path)))
    sources += _study_sources(run)
    rows: list[dict[str, Any]] = []
    for cid, case in run.cases.items():
        labels = case.metadata.get("human_labels")
        if not isinstance(labels, dict):
            continue
        for rater, value in labels.items():
            if isinstance(value, dict):
                rows.extend({"id": cid, "rater": str(rater), "value": v, "dimension": str(d)} for d, v in value.items())
            else:
                rows.append({"id": cid, "rater": str(rater), "value": value, "dimension": None})
    if rows:
        frame = pd.DataFrame(rows)
        if frame["dimension"].isna().all():
            frame = frame.drop(columns="dimension")
        numeric = pd.to_numeric(frame["value"], errors="coerce")
        if numeric.notna().sum() == frame["value"].notna().sum():
            frame["value"] = numeric
        sources.append(("case metadata (human_labels)", frame, None))
    return sources


def _study_sources(run: RunData) -> list[tuple[str, pd.DataFrame, set[tuple[str, str, int]] | None]]:
    """The ratings of the run's `mheval annotate` studies of single-turn protocols (read with the run,
    RunData.studies), as label tables."""
    out: list[tuple[str, pd.DataFrame, set[tuple[str, str, int]] | None]] = []
    for study in run.studies:
        frame = study.labels
        if frame.empty:
            continue
        rated = None
        if "model" in frame.columns:
            rated = {(str(i), str(m), int(s)) for i, m, s in zip(frame["id"], frame["model"], frame["sample"],
                                                                  strict=True)}  # fmt: skip
        out.append((f"study {study.id} (mheval annotate)", frame.drop(columns=["model", "sample"], errors="ignore"),
                    rated))  # fmt: skip
    return out


def _match_protocol(run: RunData, human: pd.DataFrame) -> tuple[str | None, str | None, str]:
    """(protocol, dimension, note) that the human table rates, among the run's protocols."""
    values = human["value"].dropna()
    if values.empty:
        return None, None, "no human values"
    if pd.api.types.is_numeric_dtype(human["value"]):
        dims = sorted(set(human["dimension"].dropna().astype(str))) if "dimension" in human.columns else []
        for protocol in run.protocols:
            known = protocol_dimensions(protocol)
            if dims and set(dims) <= set(known):
                return protocol, None, ""
        if not dims and APPROPRIATENESS in run.protocols:
            return "appropriateness", "appropriateness", ""
        return None, None, "numeric human labels match no scale protocol of this run"
    wanted = set(values.astype(str))
    best = max(run.protocols, key=lambda p: len(wanted & set(protocol_labels(p))), default=None)
    if best is None or not wanted & set(protocol_labels(best)):
        return None, None, "the human labels match no label protocol of this run"
    return best, None, ""


def _target_is_case(protocol: str) -> bool:
    from mheval.reporting.rundata import _protocol

    spec = _protocol(protocol)
    return spec is not None and spec.target == "case"


def _judgment_frame(run: RunData, protocol: str, rated: set[tuple[str, str, int]] | None) -> pd.DataFrame:
    rows = [
        judgment_row(j) for j in run.of(protocol) if rated is None or (j.case_id, j.model or "", j.sample or 0) in rated
    ]
    return pd.DataFrame(rows)


def human_agreement(run: RunData, *, n_boot: int = 1000) -> tuple[pd.DataFrame, list[str]]:
    """One row per block of `agreement_report` (humans, then each judge) for each source of human labels."""
    from mheval.analysis.agree import agreement_report

    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    try:
        sources = human_label_sources(run)
    except InputError as exc:
        return pd.DataFrame(columns=AGREEMENT_COLUMNS), [f"human labels could not be read: {exc}"]
    for where, human, rated in sources:
        protocol, dimension, why = _match_protocol(run, human)
        if protocol is None:
            notes.append(f"{where}: {why}")
            continue
        if not _target_is_case(protocol) and rated is None:
            judged = sorted({j.model for j in run.of(protocol) if j.model})
            if len(judged) > 1:
                notes.append(
                    f"{where}: the human labels have no model column, so they cannot be matched "
                    f"to the {protocol} judgments of {len(judged)} models"
                )
                continue
        judgments = _judgment_frame(run, protocol, None if _target_is_case(protocol) else rated)
        try:
            report = agreement_report(
                human, judgments if not judgments.empty else None, protocol=protocol, dimension=dimension, n_boot=n_boot
            )
        except InputError as exc:
            notes.append(f"{where} vs {protocol}: {exc}")
            continue
        notes.extend(f"{where} vs {protocol}: {n}" for n in report.notes)
        for b in report.blocks:
            est = b.estimate(report.headline)
            a = b.assessment
            position = a.human.position if a is not None and a.human is not None else None
            rows.append(
                {
                    "source": where,
                    "protocol": protocol,
                    "dimension": b.dimension or "",
                    "block": "humans among themselves" if b.kind == "human" else b.name,
                    "kind": b.kind,
                    "items": b.n_items,
                    "statistic": "ICC(A,1)" if report.scale else "Cohen's kappa",
                    **(est_columns("value", est) if est is not None else {"value": None}),
                    "verdict": a.verdict if a is not None else None,
                    "vs_humans": position,
                    "leniency": a.leniency if a is not None else None,
                    "self_consistency": b.self_consistency.value if b.self_consistency else None,
                    "unscored": b.counts.get("unscored"),
                }
            )
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS), list(dict.fromkeys(notes))


# --------------------------------------------------------------------------- repeats and grounding


def self_consistency(run: RunData, *, n_boot: int = 1000) -> pd.DataFrame:
    """Per protocol x judge with repeats: share of units whose repeats all agree, and kappa or ICC over repeats.

    A judgment stands for its label or its single number (`score_value`); the statistics are
    `mheval.stats.consistency.repeat_consistency` over the units x repeats matrix.
    """
    groups: dict[tuple[str, str], dict[tuple[str, str | None, int | None], dict[int, Any]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    has_repeats = {(j.protocol, j.judge) for j in run.judgments if j.repeat > 0}
    for j in run.judgments:
        if (j.protocol, j.judge) not in has_repeats or j.status != "ok":
            continue
        value = j.label if j.label is not None else score_value(j)
        if value is not None:
            groups[(j.protocol, j.judge)][(j.case_id, j.model, j.sample)][j.repeat] = value
    rows = []
    for (protocol, judge), units in groups.items():
        repeats = sorted({r for v in units.values() for r in v})
        matrix = pd.DataFrame([[v.get(r) for r in repeats] for v in units.values()], columns=repeats, dtype=object)
        c = repeat_consistency(matrix, n_boot=n_boot)
        if not c.units:
            continue
        rows.append(
            {
                "protocol": protocol,
                "judge": judge,
                "units": c.units,
                "repeats": c.repeats,
                **rate_columns("identical", c.identical, c.units),
                "statistic": c.statistic_name,
                **est_columns("value", c.agreement),
                "note": c.agreement.note or "",
            }
        )
    return pd.DataFrame(rows)


def is_ungrounded(j: Judgment) -> bool:
    """The judgment was unscored as ungrounded, or carries an ungrounded flag (``ungrounded``, ``ungrounded:<dim>``)."""
    return j.reason == Reason.UNGROUNDED or any(UNGROUNDED in f.lower() for f in j.flags)


def ungrounded_judgments(run: RunData) -> pd.DataFrame:
    """Per judge x protocol, the two ungrounded measures side by side under their own names.

    ``ungrounded_judgments_*``: judgments that `is_ungrounded`, of all judgments (with a Wilson interval).
    ``claims`` / ``ungrounded_claims_*``: the claim-level rate of `judges.grounding.ungrounded_rate`,
    over the judgments whose grounding was checked (empty where none was).
    """
    groups: dict[tuple[str, str], list[Judgment]] = defaultdict(list)
    for j in run.judgments:
        groups[(j.judge, j.protocol)].append(j)
    rows = []
    for (judge, protocol), items in groups.items():
        claims, ungrounded, rate = ungrounded_rate(items).get(judge, (0, 0, None))
        rows.append(
            {
                "judge": judge,
                "protocol": protocol,
                "judgments": len(items),
                **rate_columns(UNGROUNDED_JUDGMENTS, sum(map(is_ungrounded, items)), len(items)),
                "claims": claims if rate is not None else None,
                f"{UNGROUNDED_CLAIMS}_n": ungrounded if rate is not None else None,
                f"{UNGROUNDED_CLAIMS}_rate": rate,
            }
        )
    return pd.DataFrame(rows)


def flag_counts(run: RunData) -> pd.DataFrame:
    """How often each judgment flag occurs, per judge x protocol."""
    counter: Counter[tuple[str, str, str]] = Counter()
    for j in run.judgments:
        for f in j.flags:
            counter[(j.judge, j.protocol, f)] += 1
    rows = [{"judge": a, "protocol": b, "flag": c, "count": n} for (a, b, c), n in sorted(counter.items())]
    return pd.DataFrame(rows, columns=["judge", "protocol", "flag", "count"])


__all__ = [
    "flag_counts",
    "human_agreement",
    "human_label_sources",
    "is_ungrounded",
    "self_consistency",
    "ungrounded_judgments",
]
