"""Generic case readers: JSONL, CSV and Parquet rows -> Cases (and any replies already given).

One row is one case. Accepted columns (after the user's `mapping` renames theirs to ours):

- `id` (else `row-<n>`), and the conversation as `turns` or `messages` (a list of {role, content};
  a JSON string in CSV) or a single `text` (one user turn). `turns`/`messages` win over `text`;
  a `text` given alongside them is kept in metadata.
- `language` (`en`/`zh`, also `en-US`, `zh-CN`...; detected when absent: any CJK ideograph -> zh),
  `crisis_label`, `locale`, `source`, `metadata` (an object, or a JSON string of one).
- `response` (+ `model`, default "reference"): a reply already given -> a Response.
- Anything else goes to metadata, so no column of the user's data is silently lost.

Every problem is an InputError naming the file, the line (JSONL/CSV: the 1-based line in the file,
the CSV header being line 1; Parquet: the 1-based row) and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mheval.errors import InputError
from mheval.records import CRISIS_LABELS, LANGUAGES, Case, Response, Turn

OUR_FIELDS: tuple[str, ...] = (
    "id",
    "turns",
    "messages",
    "text",
    "language",
    "crisis_label",
    "locale",
    "source",
    "metadata",
    "response",
    "model",
)
"""The column names the generic readers understand; `mapping` may only rename into these."""

ROLES: tuple[str, ...] = ("system", "user", "assistant")
DEFAULT_RESPONSE_MODEL = "reference"

# CJK Unified Ideographs, Extension A, Compatibility Ideographs, Extension B.
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df]")

Loaded = tuple[list[Case], list[Response]]


def detect_language(text: str) -> str:
    """`zh` if the text holds any CJK ideograph, else `en`: the two languages mheval supports."""
    return "zh" if _CJK.search(text) else "en"


def read_text(path: Path) -> str:
    """The file as text, or an InputError saying it is missing or not UTF-8 (with the bad line)."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"file is not UTF-8 (first bad byte 0x{data[exc.start]:02x} at byte {exc.start}); re-save it as UTF-8",
            path=path,
            line=line,
        ) from None


def read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise InputError("file not found", path=path)
    if path.is_dir():
        raise InputError("is a directory, expected a file", path=path)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", path=path) from None


def check_mapping(mapping: Mapping[str, str] | None) -> dict[str, str]:
    """Validate a user mapping {our field: their column}."""
    if not mapping:
        return {}
    out: dict[str, str] = {}
    for ours, theirs in mapping.items():
        if ours not in OUR_FIELDS:
            raise InputError(f"cannot map onto unknown field '{ours}'", field=ours, choices=OUR_FIELDS)
        if not isinstance(theirs, str) or not theirs:
            raise InputError(f"mapping for '{ours}' must name a column", field=ours)
        out[ours] = theirs
    return out


def _missing(value: Any) -> bool:
    """Empty CSV cells, JSON nulls and Parquet/pandas NaNs all mean "not given"."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def clean_json(value: Any) -> Any:
    """NaN -> None, recursively, so metadata stays valid JSON for the store and the report."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


class RowBuilder:
    """Turns rows into Cases, keeping the state that spans rows (seen ids, row count)."""

    def __init__(self, path: Path, mapping: Mapping[str, str] | None = None) -> None:
        self.path = path
        self.mapping = check_mapping(mapping)
        # their column -> our field, to rename rows and to name their column in errors
        self._rename = {theirs: ours for ours, theirs in self.mapping.items()}
        self._seen: dict[str, int] = {}
        self.cases: list[Case] = []
        self.responses: list[Response] = []

    def error(self, message: str, line: int, field: str | None = None, **kw: Any) -> InputError:
        if field is not None and field in self.mapping:
            message += f" (read from column '{self.mapping[field]}' by the mapping)"
            field = self.mapping[field]
        return InputError(message, path=self.path, line=line, field=field, **kw)

    def add(self, raw: Mapping[str, Any], line: int) -> None:
        """Validate one row and add its case (and response, if any)."""
        row: dict[str, Any] = {}
        for key, value in raw.items():
            key = str(key)
            ours = self._rename.get(key)
            if ours is None and key in self.mapping:
                # an unmapped column that shares a name with one of ours we read from elsewhere
                row.setdefault(f"original_{key}", value)
                continue
            row[ours or key] = value
        n = len(self.cases) + 1
        case = self._case(row, line, n)
        if case.id in self._seen:
            raise self.error(f"duplicate id '{case.id}' (first seen on line {self._seen[case.id]})", line, "id")
        self._seen[case.id] = line
        self.cases.append(case)
        response = self._response(row, line, case.id)
        if response is not None:
            self.responses.append(response)

    # -- one row ---------------------------------------------------------------------------------

    def _case(self, row: dict[str, Any], line: int, n: int) -> Case:
        case_id = self._id(row.get("id"), line, n)
        turns, leftover_text = self._turns(row, line)
        metadata = self._metadata(row.get("metadata"), line)
        if leftover_text is not None:
            metadata.setdefault("text", leftover_text)
        for key, value in row.items():
            if key not in OUR_FIELDS:
                metadata.setdefault(key, clean_json(value))
        language = self._language(row.get("language"), line, turns)
        label = self._optional_str(row, "crisis_label", line)
        if label is not None and label not in CRISIS_LABELS:
            raise self.error(f"unknown crisis_label '{label}'", line, "crisis_label", choices=CRISIS_LABELS)
        try:
            return Case(
                id=case_id,
                turns=turns,
                language=language,
                crisis_label=label,
                locale=self._optional_str(row, "locale", line),
                source=self._optional_str(row, "source", line),
                metadata=metadata,
            )
        except ValidationError as exc:
            raise validation_error(exc, self.path, line, self.mapping) from None

    def _id(self, value: Any, line: int, n: int) -> str:
        if _missing(value):
            return f"row-{n}"
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self.error(f"must be a string or integer, got {type_name(value)}", line, "id")
        return str(value).strip()

    def _turns(self, row: dict[str, Any], line: int) -> tuple[list[Turn], str | None]:
        present = [f for f in ("turns", "messages") if not _missing(row.get(f))]
        if len(present) == 2:
            raise self.error("give either 'turns' or 'messages', not both", line, "messages")
        if present:
            field = present[0]
            text = row.get("text")
            leftover = None if _missing(text) else text
            return self._parse_turns(row[field], line, field), leftover
        text = row.get("text")
        if _missing(text):
            raise self.error("missing required field: give 'text', 'turns' or 'messages'", line, "text")
        if not isinstance(text, str):
            raise self.error(f"must be a string, got {type_name(text)}", line, "text")
        return [Turn(role="user", content=text)], None

    def _parse_turns(self, value: Any, line: int, field: str) -> list[Turn]:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise self.error(f"is not valid JSON ({exc.msg})", line, field) from None
        if hasattr(value, "tolist"):  # numpy arrays from pandas-written parquet
            value = value.tolist()
        if not isinstance(value, list):
            raise self.error(f"must be a list of {{role, content}}, got {type_name(value)}", line, field)
        if not value:
            raise self.error("is empty: a case needs at least one user turn", line, field)
        turns: list[Turn] = []
        for i, item in enumerate(value):
            where = f"{field}[{i}]"
            if not isinstance(item, Mapping):
                raise self.error(f"must be an object {{role, content}}, got {type_name(item)}", line, where)
            role, content = item.get("role"), item.get("content")
            if role not in ROLES:
                raise self.error(f"unknown role {role!r}", line, f"{where}.role", choices=ROLES)
            if not isinstance(content, str):
                raise self.error(f"must be a string, got {type_name(content)}", line, f"{where}.content")
            turns.append(Turn(role=role, content=content))
        if turns[-1].role != "user":
            raise self.error(
                f"the conversation must end on a user turn (the last turn is '{turns[-1].role}')",
                line,
                field,
            )
        if not turns[-1].content.strip():
            raise self.error("the last user turn is empty", line, field)
        return turns

    def _metadata(self, value: Any, line: int) -> dict[str, Any]:
        if _missing(value):
            return {}
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise self.error(f"is not valid JSON ({exc.msg})", line, "metadata") from None
        if not isinstance(value, dict):
            raise self.error(f"must be an object, got {type_name(value)}", line, "metadata")
        return clean_json(value)

    def _language(self, value: Any, line: int, turns: list[Turn]) -> str:
        if _missing(value):
            return detect_language(" ".join(t.content for t in turns))
        if not isinstance(value, str):
            raise self.error(f"must be a string, got {type_name(value)}", line, "language")
        code = re.split(r"[-_]", value.strip().lower(), maxsplit=1)[0]
        if code not in LANGUAGES:
            raise self.error(f"unsupported language '{value}'", line, "language", choices=LANGUAGES)
        return code

    def _optional_str(self, row: dict[str, Any], field: str, line: int) -> str | None:
        value = row.get(field)
        if _missing(value):
            return None
        if not isinstance(value, str):
            raise self.error(f"must be a string, got {type_name(value)}", line, field)
        return value.strip()

    def _response(self, row: dict[str, Any], line: int, case_id: str) -> Response | None:
        text = row.get("response")
        if _missing(text):
            return None
        if not isinstance(text, str):
            raise self.error(f"must be a string, got {type_name(text)}", line, "response")
        model = self._optional_str(row, "model", line) or DEFAULT_RESPONSE_MODEL
        return Response(case_id=case_id, model=model, sample=0, text=text)


def type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def validation_error(
    exc: ValidationError, path: Path | str, line: int | None, mapping: Mapping[str, str] | None = None
) -> InputError:
    """The first pydantic error as an InputError naming the field (`turns[2].role`)."""
    err = exc.errors()[0]
    field = ""
    for part in err.get("loc", ()):
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if field and mapping and field in mapping:
        message += f" (read from column '{mapping[field]}' by the mapping)"
        field = mapping[field]
    return InputError(message, path=path, line=line, field=field or "turns")


# -- the three formats ----------------------------------------------------------------------------


def read_jsonl(path: Path, mapping: Mapping[str, str] | None = None) -> Loaded:
    """One JSON object per line; blank lines are skipped."""
    builder = RowBuilder(path, mapping)
    for line_no, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON ({exc.msg} at column {exc.colno})", path=path, line=line_no) from None
        if not isinstance(row, dict):
            raise InputError(f"each line must be a JSON object, got {type_name(row)}", path=path, line=line_no)
        builder.add(row, line_no)
    return builder.cases, builder.responses


def read_csv(path: Path, mapping: Mapping[str, str] | None = None) -> Loaded:
    """A header row, then one case per record; quoted cells may span lines."""
    builder = RowBuilder(path, mapping)
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("file is empty (no header row)", path=path, line=1) from None
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", path=path, line=1) from None
    header = [h.strip() for h in header]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise InputError("duplicate column in the header", path=path, line=1, field=dupes[0])
    for line_no, cells in _csv_records(reader, path):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise InputError(
                f"row has {len(cells)} cells but the header has {len(header)} columns", path=path, line=line_no
            )
        builder.add(dict(zip(header, cells, strict=True)), line_no)
    return builder.cases, builder.responses


def _csv_records(reader: Any, path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line of the record, cells); a record's first line is the line after the previous one."""
    start = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"malformed CSV: {exc}", path=path, line=start) from None
        yield start, cells
        start = reader.line_num + 1


def read_parquet(path: Path, mapping: Mapping[str, str] | None = None) -> Loaded:
    """Parquet rows; errors name the 1-based row number as the line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    read_bytes(path)  # missing file / directory -> the same messages as the other formats
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", path=path) from None
    return read_rows(table.to_pylist(), path, mapping)


def read_rows(rows: Iterable[Mapping[str, Any]], path: Path, mapping: Mapping[str, str] | None = None) -> Loaded:
    """Rows already parsed (numbered from 1), for Parquet and for callers holding dicts."""
    builder = RowBuilder(path, mapping)
    for n, row in enumerate(rows, start=1):
        builder.add(row, n)
    return builder.cases, builder.responses


def json_records(text: str, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line or array position, record) from the text of a JSONL file or a JSON array file."""
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON array ({exc.msg})", path=path, line=exc.lineno) from None
        for n, item in enumerate(items, start=1):
            if not isinstance(item, dict):
                raise InputError(f"array item {n} must be an object, got {type_name(item)}", path=path)
            yield n, item
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON ({exc.msg} at column {exc.colno})", path=path, line=n) from None
        if not isinstance(item, dict):
            raise InputError(f"each line must be a JSON object, got {type_name(item)}", path=path, line=n)
        yield n, item
