"""Flat tables of a run (cases, responses, judgments) for export and for the summary."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mheval.errors import InputError
from mheval.fileio import atomic_path, atomic_write, check_output, csv_safe_frame
from mheval.records import Judgment
from mheval.runfolder.store import Store

TABLES = ("cases", "responses", "judgments")
FORMATS = ("jsonl", "csv", "parquet")

# The judge saw text in the reply addressed to it (judges/flags.py). What the aggregates do with such
# judgments is the run's `on_injection` policy, applied here and nowhere else.
INJECTION_FLAG = "injection_suspected"
INJECTION_POLICIES = ("flag", "exclude")


def injection_policy(config: dict[str, Any] | None) -> str:
    """The run's `on_injection` ("flag" unless the run's config says "exclude")."""
    policy = (config or {}).get("on_injection") or "flag"
    return policy if policy in INJECTION_POLICIES else "flag"


def is_injected(judgment: Judgment) -> bool:
    return INJECTION_FLAG in judgment.flags


@dataclass
class CountedJudgments:
    """A run's judgments as its aggregates see them: under "exclude" the flagged ones are set apart."""

    policy: str
    counted: list[Judgment]
    excluded: list[Judgment] = field(default_factory=list)


def counted_judgments(store: Store, judgments: Iterable[Judgment] | None = None) -> CountedJudgments:
    """Every aggregate (summary, report, compare, agree) reads judgments through this one function."""
    policy = injection_policy(store.get_meta("config"))
    items = list(store.iter_judgments() if judgments is None else judgments)
    if policy != "exclude":
        return CountedJudgments(policy, items)
    return CountedJudgments(policy, [j for j in items if not is_injected(j)], [j for j in items if is_injected(j)])


def judgment_row(j: Judgment) -> dict[str, Any]:
    """One judgment as a flat row (the judgments table, and the frames the analyses read)."""
    return {
        "case_id": j.case_id,
        "model": j.model,
        "sample": j.sample,
        "protocol": j.protocol,
        "judge": j.judge,
        "repeat": j.repeat,
        "label": j.label,
        "scores": j.scores,
        "total": j.total,
        "status": j.status,
        "reason": j.reason,
        "detail": j.detail,
        "rationale": j.rationale,
        "evidence": j.evidence,
        "flags": j.flags,
        "prompt_tokens": j.usage.prompt_tokens,
        "completion_tokens": j.usage.completion_tokens,
        "cost_usd": j.usage.cost_usd,
        "latency_s": j.latency_s,
        "raw": j.raw,
    }


def table_frame(store: Store, table: str, *, counted: bool = False) -> pd.DataFrame:
    """One table of the run; with `counted`, the judgments table holds only those the aggregates count."""
    if table == "cases":
        rows: list[dict[str, Any]] = [
            {
                "case_id": c.id,
                "language": c.language,
                "crisis_label": c.crisis_label,
                "locale": c.locale,
                "source": c.source,
                "n_turns": len(c.turns),
                "turns": [t.model_dump() for t in c.turns],
                "metadata": c.metadata,
            }
            for c in store.cases()
        ]
    elif table == "responses":
        rows = [
            {
                "case_id": r.case_id,
                "model": r.model,
                "sample": r.sample,
                "text": r.text,
                "truncated": r.truncated,
                "error": r.error,
                "prompt_tokens": r.usage.prompt_tokens,
                "completion_tokens": r.usage.completion_tokens,
                "cost_usd": r.usage.cost_usd,
                "latency_s": r.latency_s,
            }
            for r in store.responses()
        ]
    elif table == "judgments":
        rows = [judgment_row(j) for j in (counted_judgments(store).counted if counted else store.iter_judgments())]
    else:
        raise InputError(f"unknown table {table!r}", field="table", choices=TABLES)
    return pd.DataFrame(rows)


def export_table(
    store: Store, table: str, fmt: str, output: str | Path | None = None, *, overwrite: bool = False
) -> None:
    """Write one table as JSONL, CSV or Parquet to `output`, or to stdout when it is None.

    Nested fields (turns, scores, evidence) stay nested in JSONL and Parquet, and are JSON strings
    in CSV; CSV text cells that a spreadsheet would run as formulas are prefixed with `'`. `output`
    is refused when it is a run's own file, or exists without `overwrite`; it is checked before
    anything is read and written through a temporary file, so a failure leaves no half file.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", field="format", choices=FORMATS)
    if table not in TABLES:
        raise InputError(f"unknown table {table!r}", field="table", choices=TABLES)
    if fmt == "parquet" and output is None:
        raise InputError("parquet is binary: give --output FILE", field="output")
    if output is not None:
        check_output(output, overwrite=overwrite)
    frame = table_frame(store, table)
    if fmt == "jsonl":
        text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in frame.to_dict("records"))
        _emit(text, output)
    elif fmt == "csv":
        _emit(csv_text(frame), output)
    else:
        assert output is not None
        with atomic_path(output) as tmp:
            frame_for_parquet(frame).to_parquet(tmp, index=False)


def csv_text(frame: pd.DataFrame) -> str:
    """A frame as CSV for spreadsheets: nested values as JSON, formula-like text neutralised."""
    flat = frame.copy()
    for col in flat.columns:
        if flat[col].map(lambda v: isinstance(v, dict | list)).any():
            flat[col] = flat[col].map(lambda v: json.dumps(v, ensure_ascii=False))
    buffer = io.StringIO()
    csv_safe_frame(flat).to_csv(buffer, index=False)
    return buffer.getvalue()


def frame_for_parquet(frame: pd.DataFrame) -> pd.DataFrame:
    """Parquet wants one type per column: dicts with varying keys become JSON strings."""
    out = frame.copy()
    for col in ("scores", "evidence", "metadata", "turns"):
        if col in out.columns:
            out[col] = out[col].map(lambda v: json.dumps(v, ensure_ascii=False))
    return out


def _emit(text: str, output: str | Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    atomic_write(output, text)
