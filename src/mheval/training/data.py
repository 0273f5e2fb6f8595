"""Reading training rows from JSONL or CSV, and turning a row's fields into a case and a reply.

Every problem is an InputError naming the file, the line (1-based; the CSV header is line 1) and
the field, so `mheval train` can say exactly what to fix.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mheval.errors import InputError
from mheval.records import Case, Turn
from mheval.suites.papers import split_segments
from mheval.suites.readers import json_records, read_text, type_name
from mheval.textscan import detect_language

RESPONSE_NAMES: frozenset[str] = frozenset({"response", "answer", "reply", "output", "completion"})
"""Text fields with these names hold the reply under judgment; any other text field holds the case."""


def read_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(line, row) pairs of a .jsonl/.json (array) or .csv file."""
    path = Path(path)
    text = read_text(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows = list(_csv_rows(text))
    elif suffix in (".jsonl", ".json", ".ndjson"):
        rows = list(json_records(text, path))
    else:
        raise InputError(f"unsupported file type {suffix or '(none)'!r}", path=path, choices=[".jsonl", ".csv"])
    if not rows:
        raise InputError("no rows", path=path)
    return rows


def _csv_rows(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    for row in reader:
        yield reader.line_num, dict(row)


def get_field(row: dict[str, Any], name: str) -> Any:
    """`name` may be a dotted path into nested objects (`human_scores.H1`); a missing step is None."""
    value: Any = row
    for step in name.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def is_missing(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    )


def case_from_field(value: Any, *, case_id: str, path: Path, line: int, field: str) -> Case:
    """A case from a text field: a string (one user turn, or `[seeker]...[supporter]...` segments), a
    list of sentences (joined), or a list of {role, content} turns. CSV cells may hold JSON lists."""
    if isinstance(value, str) and value.lstrip().startswith("[{"):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
    turns: list[Turn]
    try:
        if isinstance(value, str):
            if value.lstrip().startswith(("[seeker]", "[supporter]")):
                turns = [Turn(role=r, content=c) for r, c in split_segments(value.strip())]
            else:
                turns = [Turn(role="user", content=value)]
        elif isinstance(value, list) and all(isinstance(s, str) for s in value):
            turns = [Turn(role="user", content=" ".join(s.strip() for s in value if s.strip()))]
        elif isinstance(value, list) and all(isinstance(t, dict) for t in value):
            turns = [Turn(role=t.get("role"), content=t.get("content")) for t in value]
        else:
            raise InputError(
                f"expected text, a list of sentences or a list of turns, got {type_name(value)}",
                path=path,
                line=line,
                field=field,
            )
        text = " ".join(t.content for t in turns)
        return Case(id=case_id, turns=turns, language=detect_language(text))
    except (ValidationError, ValueError) as exc:
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise InputError(detail, path=path, line=line, field=field) from None


def response_from_field(value: Any, *, path: Path, line: int, field: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"expected text, got {type_name(value)}", path=path, line=line, field=field)
    text = value.strip()
    if text.startswith("[supporter]"):
        text = text[len("[supporter]") :].strip()
    return text
