"""Flat tables of a run (cases, responses, judgments) for export and for the summary."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from mheval.engine.store import Store
from mheval.errors import InputError

TABLES = ("cases", "responses", "judgments")
FORMATS = ("jsonl", "csv", "parquet")


def table_frame(store: Store, table: str) -> pd.DataFrame:
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
                "error": r.error,
                "prompt_tokens": r.usage.prompt_tokens,
                "completion_tokens": r.usage.completion_tokens,
                "cost_usd": r.usage.cost_usd,
                "latency_s": r.latency_s,
            }
            for r in store.responses()
        ]
    elif table == "judgments":
        rows = [
            {
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
                "rationale": j.rationale,
                "evidence": j.evidence,
                "flags": j.flags,
                "prompt_tokens": j.usage.prompt_tokens,
                "completion_tokens": j.usage.completion_tokens,
                "cost_usd": j.usage.cost_usd,
                "latency_s": j.latency_s,
                "raw": j.raw,
            }
            for j in store.iter_judgments()
        ]
    else:
        raise InputError(f"unknown table {table!r}", field="table", choices=TABLES)
    return pd.DataFrame(rows)


def export_table(store: Store, table: str, fmt: str, output: str | Path | None = None) -> None:
    """Write one table as JSONL, CSV or Parquet to `output`, or to stdout when it is None.

    Nested fields (turns, scores, evidence) stay nested in JSONL and Parquet, and are JSON strings
    in CSV. A file is written beside its target and renamed, so a failure leaves no half file.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", field="format", choices=FORMATS)
    if fmt == "parquet" and output is None:
        raise InputError("parquet is binary: give --output FILE", field="output")
    frame = table_frame(store, table)
    if fmt == "jsonl":
        text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in frame.to_dict("records"))
        _emit(text, output)
    elif fmt == "csv":
        flat = frame.copy()
        for col in flat.columns:
            if flat[col].map(lambda v: isinstance(v, dict | list)).any():
                flat[col] = flat[col].map(lambda v: json.dumps(v, ensure_ascii=False))
        buffer = io.StringIO()
        flat.to_csv(buffer, index=False)
        _emit(buffer.getvalue(), output)
    else:
        assert output is not None
        out = Path(output)
        tmp = out.with_name(out.name + ".tmp")
        frame_for_parquet(frame).to_parquet(tmp, index=False)
        tmp.replace(out)


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
    out = Path(output)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
