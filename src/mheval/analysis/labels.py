"""Reading human labels from CSV, JSONL or JSON into one long table.

The result always has the columns ``id``, ``rater``, ``value`` and, when the file has several
dimensions, ``dimension``; one row per (item, rater[, dimension]). A ``model`` / ``sample`` field next
to the id (response-level ratings: which model's response, which sample) is kept as a text column of
the same name. Accepted shapes:

* long form: fields ``id``, ``rater``, ``value`` (and optionally ``dimension``);
* wide form: one column (CSV) or top-level key (JSON) per rater, chosen with ``raters=``
  or, in CSV, every column except the id, ``dimension`` and common text columns;
* a JSON field holding a dict rater -> value, as in ``{"id": ..., "human_labels": {"H1": ...}}``,
  or rater -> {dimension -> value} for several dimensions; the field is ``field=`` or found
  among ``human_labels``, ``human_scores``, ``labels``, ``scores``, ``ratings``, ``annotations``.

Missing values (empty, NaN, NA, null, None) are kept as NaN rows, so the statistics see the gap.
Values become floats when every present value is a number, else strings.
Bad input raises `InputError` naming the file, line and field.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mheval.errors import InputError

DICT_FIELDS = ("human_labels", "human_scores", "labels", "scores", "ratings", "annotations")
# Columns that are never raters when guessing a CSV's wide form.
_NOT_RATERS = {
    "dimension",
    "inputs",
    "input",
    "text",
    "context",
    "response",
    "answer",
    "dataset_id",
    "source",
    "answer_source",
    "explanation",
    "model",
    "sample",
    "language",
    "case_id",
    "conversation",
    "notes",
}
_MISSING_TEXT = {"", "na", "nan", "n/a", "null", "none"}
_RESPONSE_FIELDS = ("model", "sample")  # which response was rated, as in the judgments export
FORMATS = ("csv", "tsv", "jsonl", "ndjson", "json")


def _text(value: Any) -> str | None:
    """A model/sample value as text ("0" for 0 or 0.0, so it matches the judgments' sample numbers)."""
    if _is_missing(value):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip().lower() in _MISSING_TEXT


class _Rows:
    """Collects long rows, refusing duplicates, remembering the line each came from."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.seen: dict[tuple[str | None, ...], int] = {}

    def add(self, item: Any, rater: Any, value: Any, dimension: Any, line: int, field: str, record: Any = None) -> None:
        """One rating; ``record`` (the row or JSON object) supplies the optional ``model`` and ``sample``."""
        if _is_missing(item):
            raise InputError("the item id is missing", path=self.path, line=line, field=field)
        if _is_missing(rater):
            raise InputError("the rater is missing", path=self.path, line=line, field="rater")
        if isinstance(value, dict | list):
            raise InputError(
                f"rater {rater!r}: expected one value, got a {type(value).__name__}",
                path=self.path,
                line=line,
                field=field,
            )
        dim = None if _is_missing(dimension) else str(dimension)
        response = {c: _text(record.get(c)) if isinstance(record, dict) else None for c in _RESPONSE_FIELDS}
        key = (str(item), str(rater), dim, response["model"], response["sample"])
        if key in self.seen:
            raise InputError(
                f"duplicate rating for item {key[0]!r}, rater {key[1]!r}"
                + (f", dimension {dim!r}" if dim else "")
                + "".join(f", {c} {v!r}" for c, v in response.items() if v is not None)
                + f" (first on line {self.seen[key]})",
                path=self.path,
                line=line,
                field=field,
            )
        self.seen[key] = line
        self.rows.append({"id": key[0], "rater": key[1], "value": value, "dimension": dim, **response})

    def frame(self) -> pd.DataFrame:
        if not self.rows:
            raise InputError("no ratings found", path=self.path)
        df = pd.DataFrame(self.rows, columns=["id", "rater", "value", "dimension", *_RESPONSE_FIELDS], dtype=object)
        values = [None if _is_missing(v) else v for v in df["value"]]
        numbers = []
        for v in values:
            if v is None:
                numbers.append(math.nan)
                continue
            if isinstance(v, bool):
                break
            try:
                numbers.append(float(v))
            except (TypeError, ValueError):
                break
        if len(numbers) == len(values):
            df["value"] = pd.Series(numbers, dtype="float64")
        else:
            df["value"] = pd.Series([math.nan if v is None else str(v).strip() for v in values], dtype="object")
        empty = [c for c in ("dimension", *_RESPONSE_FIELDS) if df[c].isna().all()]
        return df.drop(columns=empty)


def load_human_labels(
    path: str | Path,
    *,
    id_field: str = "id",
    field: str | None = None,
    raters: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Human labels from ``path`` (.csv, .tsv, .jsonl, .ndjson or .json) as a long DataFrame."""
    p = Path(path)
    suffix = p.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise InputError(f"unknown file type {p.suffix or '(none)'!r}", path=p, choices=FORMATS)
    if not p.is_file():
        raise InputError("file not found", path=p)
    rows = _Rows(p)
    if suffix in ("csv", "tsv"):
        _read_csv(p, rows, id_field, raters, "\t" if suffix == "tsv" else ",")
    else:
        for line, record in _json_records(p, suffix):
            _add_record(rows, record, line, id_field, field, raters)
    return rows.frame()


def _read_csv(p: Path, rows: _Rows, id_field: str, raters: Sequence[str] | None, delimiter: str) -> None:
    try:
        handle = p.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=p) from None
    with handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        header = [h.strip() for h in reader.fieldnames or []]
        if not header:
            raise InputError("empty file or no header line", path=p, line=1)
        reader.fieldnames = header
        if id_field not in header:
            raise InputError("no id column in the header", path=p, line=1, field=id_field, choices=header)
        long_form = raters is None and {"rater", "value"} <= set(header)
        if long_form:
            columns: list[str] = []
        elif raters is not None:
            missing = [r for r in raters if r not in header]
            if missing:
                raise InputError(
                    f"rater column(s) not in the header: {', '.join(missing)}",
                    path=p,
                    line=1,
                    choices=header,
                )
            columns = list(raters)
        else:
            columns = [h for h in header if h != id_field and h.lower() not in _NOT_RATERS and h]
            if not columns:
                raise InputError("no rater columns found; name them with raters=", path=p, line=1)
        try:
            for record in reader:
                line = reader.line_num
                if None in record:
                    raise InputError("more fields than the header has", path=p, line=line)
                dim = record.get("dimension")
                if long_form:
                    rows.add(record[id_field], record["rater"], record["value"], dim, line, "value", record)
                else:
                    for col in columns:
                        rows.add(record[id_field], col, record[col], dim, line, col, record)
        except csv.Error as exc:
            raise InputError(f"malformed CSV: {exc}", path=p, line=reader.line_num) from None
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", path=p) from None


def _json_records(p: Path, suffix: str) -> Iterator[tuple[int, Any]]:
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=p) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=p) from None
    if suffix == "json" and text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", path=p, line=exc.lineno) from None
        for i, record in enumerate(data):
            # A JSON array has no meaningful line per record; report the record's position instead.
            yield i + 1, record
        return
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield number, json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", path=p, line=number) from None


def _add_record(
    rows: _Rows, record: Any, line: int, id_field: str, field: str | None, raters: Sequence[str] | None
) -> None:
    p = rows.path
    if not isinstance(record, dict):
        raise InputError(f"expected a JSON object, got {type(record).__name__}", path=p, line=line)
    if id_field not in record:
        raise InputError("missing item id", path=p, line=line, field=id_field)
    item = record[id_field]
    if field is None and raters is None and {"rater", "value"} <= set(record):
        rows.add(item, record["rater"], record["value"], record.get("dimension"), line, "value", record)
        return
    if raters is not None and field is None:
        for r in raters:
            if r not in record:
                raise InputError("rater field missing", path=p, line=line, field=r)
            rows.add(item, r, record[r], record.get("dimension"), line, r, record)
        return
    name = field if field is not None else next((f for f in DICT_FIELDS if f in record), None)
    if name is None:
        raise InputError(
            "no ratings: expected long form (rater, value) or a dict field of rater -> value",
            path=p,
            line=line,
            choices=DICT_FIELDS,
        )
    if name not in record:
        raise InputError("field missing", path=p, line=line, field=name)
    ratings = record[name]
    if not isinstance(ratings, dict):
        raise InputError(
            f"expected a dict of rater -> value, got {type(ratings).__name__}", path=p, line=line, field=name
        )
    for rater, value in ratings.items():
        if raters is not None and rater not in raters:
            continue
        if isinstance(value, dict):
            for dim, v in value.items():
                rows.add(item, rater, v, dim, line, f"{name}.{rater}.{dim}", record)
        else:
            rows.add(item, rater, value, record.get("dimension"), line, f"{name}.{rater}", record)


__all__ = ["DICT_FIELDS", "load_human_labels"]
