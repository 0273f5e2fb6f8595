"""Ratings as judgments (`judge="human:<rater>"`, flagged `human`), and as the labels table `agree` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from mheval.analysis.conversation_verdicts import UNSAFE
from mheval.annotate.answers import Answer, labels_frame
from mheval.annotate.study import Study
from mheval.errors import InputError
from mheval.fileio import atomic_write, check_output
from mheval.labels import CONVERSATION_FLOW
from mheval.protocols import load_protocol
from mheval.records import Judgment, Reason

HUMAN_FLAG = "human"
FORMATS = ("judgments", "csv", "parquet")


def to_judgment(study: Study, rater: str, key: tuple[str, str, int], answers: dict[str, Answer]) -> Judgment:
    """One rater's answers on one unit as a Judgment. "Unsure" is per question: that question is left out (flag
    ``unsure:<question>``) and the others count; only when every answer is unsure is the unit unscored
    (rater_unsure). A total is given only when every question it adds up was answered."""
    case_id, model, sample = key
    ids: dict[str, Any] = {
        "case_id": case_id, "protocol": study.protocol, "judge": f"human:{rater}",
        "model": model or None, "sample": sample if sample >= 0 else None, "flags": [HUMAN_FLAG],
        "latency_s": max((a.seconds for a in answers.values()), default=0.0),
    }  # fmt: skip
    comments = "; ".join(f"{q}: {a.comment}" for q, a in answers.items() if a.comment)
    unsure = [q for q, a in answers.items() if a.unsure]
    values = {q: a.value for q, a in answers.items() if a.value is not None and not a.unsure}
    if not values:
        return Judgment.unscored(
            Reason.RATER_UNSURE, f"unsure on {', '.join(unsure) or 'every question'}", rationale=comments or None,
            **ids,
        )  # fmt: skip
    ids["flags"] = [*ids["flags"], *(f"unsure:{q}" for q in unsure)]
    if study.protocol == CONVERSATION_FLOW:
        # the flow's answers, their scores and the way back from a score, defined once (conversation-flow.yaml)
        from mheval.conversations.flow import NOT_RELEVANT, SCORES, answer_for

        scores = {q: SCORES[v] for q, v in values.items() if v in SCORES and q != UNSAFE}
        flags = [*ids.pop("flags"), *(f"not_relevant:{q}" for q, v in values.items() if v == NOT_RELEVANT)]
        total = min(scores.values()) if scores else None
        label = answer_for(total) if total is not None else None
        if UNSAFE in values:  # the rater's verdict on the whole conversation, beside the flow (not in its total)
            scores[UNSAFE] = float(values[UNSAFE])
        return Judgment(**ids, flags=flags, scores=scores, total=total, label=label, rationale=comments or None)
    spec = load_protocol(study.protocol)
    if spec.kind == "label":
        return Judgment(**ids, label=values.get("label"), rationale=comments or None)
    scores = {q: float(v) for q, v in values.items()}
    total = None
    if spec.aggregates:
        agg = spec.definition.aggregation[spec.aggregates[0]]
        picked = [scores[d] for d in agg.of if d in scores]
        if picked and len(picked) == len(agg.of):
            total = _aggregate(agg.op, picked)
    elif len(scores) == 1:
        total = next(iter(scores.values()))
    return Judgment(**ids, scores=scores, total=total, rationale=comments or None)


def _aggregate(op: str, values: list[float]) -> float:
    if op == "sum":
        return sum(values)
    if op == "mean":
        return sum(values) / len(values)
    return min(values) if op == "min" else max(values)


def human_judgments(study: Study) -> list[Judgment]:
    return [to_judgment(study, rater, key, answers) for rater, key, _, _, answers in study.rated()]


def human_labels(study: Study) -> pd.DataFrame:
    """The ratings as `agree`'s long labels table: id, rater, value (and dimension, model, sample)."""
    return labels_frame(study.protocol, study.rated())


def export_ratings(run_dir: str | Path, fmt: str = "judgments", output: str | Path | None = None, *,
                   study: str | None = None, overwrite: bool = False) -> Path:  # fmt: skip
    """Write the study's ratings: `judgments` (JSONL of Judgments), `csv` or `parquet` (one row per answer)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", field="format", choices=FORMATS)
    s = Study.open(run_dir, study)
    try:
        suffix = {"judgments": ".jsonl", "csv": ".csv", "parquet": ".parquet"}[fmt]
        path = Path(output) if output is not None else Path(run_dir) / f"ratings-{s.id}{suffix}"
        check_output(path, overwrite=overwrite, make_parents=True)
        if fmt == "judgments":
            data = "".join(j.model_dump_json() + "\n" for j in human_judgments(s)).encode("utf-8")
        else:
            frame = human_labels(s)
            if fmt == "csv":
                from mheval.fileio import csv_safe_frame

                data = csv_safe_frame(frame).to_csv(index=False).encode("utf-8")
            else:
                import io

                buffer = io.BytesIO()
                frame.to_parquet(buffer, index=False)
                data = buffer.getvalue()
        atomic_write(path, data)
        return path
    finally:
        s.close()
