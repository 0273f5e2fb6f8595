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
the CSV header being line 1; Parquet: the 1-based row) and the field. Reading is strict so that a
damaged file is refused rather than read as something else: JSONL lines are split on "\n" only (a
U+2028 or U+0085 inside a string is text, not a line break), CSV quotes must be closed, text must be
valid UTF-8 (no lone surrogates from a `\ud800` escape), and values may nest at most MAX_DEPTH levels.

mheval reads back its own exports: a `case_id` column stands for `id` when there is no `id`, and the
exported `n_turns` (the length of `turns`) is checked and dropped rather than kept as metadata.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mheval.errors import InputError
from mheval.fileio import csv_safe
from mheval.labels import CRISIS_LABELS
from mheval.records import LANGUAGES, Case, Response, Turn
from mheval.textscan import detect_language

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

MAX_DEPTH = 64
"""Deepest nesting of lists and objects accepted in a value. Real cases nest two or three levels; the
cap keeps every later step (hashing, the store, the report) clear of Python's recursion limit."""

# JSON's own whitespace. str.strip() would also eat U+2028, U+0085 ..., which are text inside JSON.
_JSON_WS = " \t\r\n"
_SURROGATE = re.compile("[\ud800-\udfff]")

Loaded = tuple[list[Case], list[Response]]


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
    check_file(path)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", path=path) from None


def check_file(path: Path) -> None:
    """InputError unless `path` names an existing regular file (a NUL or an over-long name included)."""
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except (OSError, ValueError) as exc:  # ENAMETOOLONG, "embedded null byte"
        raise InputError(f"cannot use this path: {exc}", path=repr(str(path))[1:-1]) from None
    if not exists:
        raise InputError("file not found", path=path)
    if is_dir:
        raise InputError("is a directory, expected a file", path=path)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(
    text: str, *, path: Path | str, line: int | None, field: str | None = None, constants: bool = True
) -> Any:
    """json.loads, with every way it can fail (syntax, nesting, huge integers) as an InputError.
    `constants=False` also refuses Python's NaN and Infinity, which strict JSON does not have."""
    try:
        return json.loads(text) if constants else json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        where = f" at column {exc.colno}" if exc.lineno == 1 else f" at line {exc.lineno} column {exc.colno}"
        what = "is not valid JSON" if field else "malformed JSON"
        raise InputError(f"{what} ({exc.msg}{where})", path=path, line=line, field=field) from None
    except RecursionError:
        raise InputError(
            f"JSON nested too deeply (more than {MAX_DEPTH} levels is refused)", path=path, line=line, field=field
        ) from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise InputError(f"unreadable JSON value ({exc})", path=path, line=line, field=field) from None


def _child(field: str | None, key: str | int) -> str:
    if isinstance(key, int):
        return f"{field or ''}[{key}]"
    return f"{field}.{key}" if field else key


def json_safe(value: Any, *, path: Path | str, line: int | None, field: str | None, _depth: int = 0) -> Any:
    """`value` as plain JSON data the store can hold, or an InputError naming where it is not.

    NaN and infinities (Parquet/pandas gaps, JSON's `NaN`) become None, as the store would write them;
    dates become ISO strings; arrays become lists. Refused: lone surrogates (not encodable as UTF-8),
    binary data, unknown types and nesting deeper than MAX_DEPTH.
    """
    if _depth > MAX_DEPTH:
        top = (field or "").split(".")[0].split("[")[0] or None
        raise InputError(f"nested more than {MAX_DEPTH} levels deep", path=path, line=line, field=top)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        check_text(value, path=path, line=line, field=field)
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = key if isinstance(key, str) else str(key)
            check_text(name, path=path, line=line, field=field)
            out[name] = json_safe(item, path=path, line=line, field=_child(field, name), _depth=_depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [
            json_safe(item, path=path, line=line, field=_child(field, i), _depth=_depth + 1)
            for i, item in enumerate(value)
        ]
    if isinstance(value, bytes | bytearray | memoryview):
        raise InputError("holds binary data, not text: store it as a UTF-8 string", path=path, line=line, field=field)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta | Decimal):
        return str(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return json_safe(value.tolist(), path=path, line=line, field=field, _depth=_depth)
    raise InputError(f"unsupported value of type {type(value).__name__}", path=path, line=line, field=field)


def check_text(text: str, *, path: Path | str, line: int | None, field: str | None) -> None:
    """An InputError naming path, line and field when `text` holds a lone surrogate (not valid Unicode)."""
    bad = _SURROGATE.search(text)
    if bad:
        raise InputError(
            f"holds a lone surrogate U+{ord(bad.group()):04X} at character {bad.start()} (not valid Unicode text)",
            path=path,
            line=line,
            field=field,
        )


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
    """NaN -> None, recursively, so metadata stays valid JSON for the store and the report.

    For values already passed through json_safe (whose depth is bounded); kept for callers that
    hold plain data of their own.
    """
    if isinstance(value, float) and not math.isfinite(value):
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
            check_text(key, path=self.path, line=line, field=None)
            value = json_safe(value, path=self.path, line=line, field=key)
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
        if _missing(row.get("id")) and not _missing(row.get("case_id")):
            row["id"] = row.pop("case_id")  # a cases table exported by mheval names it so
        case_id = self._id(row.get("id"), line, n)
        turns, leftover_text = self._turns(row, line)
        if "n_turns" in row and self._exported_turn_count(row["n_turns"]) == len(turns):
            del row["n_turns"]  # derived by the export; a count that disagrees stays, as metadata
        metadata = self._metadata(row.get("metadata"), line)
        if leftover_text is not None:
            metadata.setdefault("text", leftover_text)
        for key, value in row.items():
            if key not in OUR_FIELDS:
                metadata.setdefault(key, value)
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

    @staticmethod
    def _exported_turn_count(value: Any) -> int | None:
        """The export's n_turns as an int: a JSON number, a Parquet int, or a CSV string of digits."""
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
        return None

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

    def _from_json(self, value: str, line: int, field: str) -> Any:
        """A JSON string cell (CSV turns/metadata) parsed and checked like any other value."""
        where = self.mapping.get(field, field)
        parsed = parse_json(value, path=self.path, line=line, field=where)
        return json_safe(parsed, path=self.path, line=line, field=where)

    def _parse_turns(self, value: Any, line: int, field: str) -> list[Turn]:
        if isinstance(value, str):
            value = self._from_json(value, line, field)
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
            value = self._from_json(value, line, "metadata")
        if not isinstance(value, dict):
            raise self.error(f"must be an object, got {type_name(value)}", line, "metadata")
        return dict(value)

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
    for line_no, row in _jsonl_objects(read_text(path), path):
        builder.add(row, line_no)
    return builder.cases, builder.responses


def _jsonl_objects(text: str, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) per non-blank line. Lines end at "\n" only, as JSON Lines defines them: the
    other characters str.splitlines() breaks on (U+2028, U+0085, \v, \f ...) may stand raw inside a
    JSON string, and mheval's own export writes them so."""
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip(_JSON_WS):
            continue
        row = parse_json(line, path=path, line=line_no)
        if not isinstance(row, dict):
            raise InputError(f"each line must be a JSON object, got {type_name(row)}", path=path, line=line_no)
        yield line_no, row


def read_csv(path: Path, mapping: Mapping[str, str] | None = None) -> Loaded:
    """A header row, then one case per record; quoted cells may span lines.

    Strict: a quote left open is an error at the record where it opened, never a cell that silently
    swallows the rest of the file.
    """
    text = read_text(path)
    # csv's default cap on a cell (128 KiB) would refuse a long conversation; no cell can be longer
    # than the file, so that is the cap while this file is read (it is one process-wide setting).
    previous = csv.field_size_limit(max(len(text), csv.field_size_limit()))
    try:
        return _read_csv_text(text, path, mapping)
    finally:
        csv.field_size_limit(previous)


def _read_csv_text(text: str, path: Path, mapping: Mapping[str, str] | None) -> Loaded:
    builder = RowBuilder(path, mapping)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records = _csv_records(reader, path)
    try:
        _, header = next(records)
    except StopIteration:
        raise InputError("file is empty (no header row)", path=path, line=1) from None
    header = [h.strip() for h in header]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise InputError("duplicate column in the header", path=path, line=1, field=dupes[0])
    names = [h for h in header if builder._rename.get(h, h) in _CSV_NAME_FIELDS]
    for line_no, cells in records:
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise InputError(
                f"row has {len(cells)} cells but the header has {len(header)} columns", path=path, line=line_no
            )
        row = dict(zip(header, cells, strict=True))
        for name in names:
            row[name] = _csv_unescape(row[name])
        builder.add(row, line_no)
    return builder.cases, builder.responses


# Name-like columns of a cases table that mheval's CSV export writes as raw text (turns and metadata
# are JSON), where it defuses a value a spreadsheet would run as a formula by prefixing `'`.
_CSV_NAME_FIELDS = ("id", "case_id", "locale", "source")


def _csv_unescape(cell: str) -> str:
    """Undo the export's formula guard (`'=x` -> `=x`) so an exported id reads back as itself.

    Only on name-like columns: a conversation's text is never altered.
    """
    return cell[1:] if cell.startswith("'") and csv_safe(cell[1:]) == cell else cell


def _csv_records(reader: Any, path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line of the record, cells); a record's first line is the line after the previous one."""
    start = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            reason = str(exc)
            if "unexpected end of data" in reason:
                reason = "a quoted cell that opens in this record is never closed"
            elif "expected after" in reason:
                reason = f'a stray quote inside a quoted cell ({reason}); write a quote in a quoted cell as ""'
            ends = f" (the record runs to line {reader.line_num})" if reader.line_num > start else ""
            raise InputError(f"malformed CSV: {reason}{ends}", path=path, line=start) from None
        yield start, cells
        start = reader.line_num + 1


def read_parquet(path: Path, mapping: Mapping[str, str] | None = None) -> Loaded:
    """Parquet rows; errors name the 1-based row number as the line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_file(path)  # missing file / directory -> the same messages as the other formats
    try:
        names = [str(n) for n in pq.read_schema(path).names]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:  # Arrow would refuse the table with a less helpful message
            raise InputError("duplicate column in the table", path=path, field=dupes[0])
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", path=path) from None
    # Column by column, so that a value Arrow cannot turn into Python (bytes that are not UTF-8 in a
    # string column, a date out of range) is reported with its column and row.
    columns = [_parquet_column(table.column(i), path, name) for i, name in enumerate(names)]
    rows = (dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True))
    return read_rows(rows, path, mapping)


def _parquet_column(column: Any, path: Path, name: str) -> list[Any]:
    try:
        return list(column.to_pylist())
    except Exception:  # Arrow raises several types (ArrowInvalid, UnicodeDecodeError, OverflowError ...)
        pass
    for row, scalar in enumerate(column, start=1):
        try:
            scalar.as_py()
        except UnicodeDecodeError as exc:
            raise InputError(
                f"is not valid UTF-8 text (byte 0x{exc.object[exc.start]:02x} at {exc.start})",
                path=path,
                line=row,
                field=name,
            ) from None
        except Exception as exc:
            raise InputError(f"cannot be read ({type(exc).__name__}: {exc})", path=path, line=row, field=name) from None
    raise InputError("cannot be read", path=path, field=name)


def read_rows(rows: Iterable[Mapping[str, Any]], path: Path, mapping: Mapping[str, str] | None = None) -> Loaded:
    """Rows already parsed (numbered from 1), for Parquet and for callers holding dicts."""
    builder = RowBuilder(path, mapping)
    for n, row in enumerate(rows, start=1):
        builder.add(row, n)
    return builder.cases, builder.responses


def json_records(text: str, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, record) from the text of a JSONL file or a JSON array file, checked by json_safe.

    For an array the line is where the item starts in the file, so errors point into the file as
    they do for JSONL; the 1-based position of a record is its order in what this yields.
    """
    items = _json_array(text, path) if text.lstrip(_JSON_WS).startswith("[") else _jsonl_objects(text, path)
    for line, item in items:
        yield line, json_safe(item, path=path, line=line, field=None)


def _json_array(text: str, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of a top-level JSON array, one at a time, each with the line it starts on."""
    decoder = json.JSONDecoder()
    size = len(text)
    line, counted = 1, 0

    def skip(pos: int) -> int:
        while pos < size and text[pos] in _JSON_WS:
            pos += 1
        return pos

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, pos)
        counted = pos
        return line

    pos = skip(skip(0) + 1)  # past "["
    if pos < size and text[pos] == "]":
        pos = skip(pos + 1)
    else:
        n = 0
        while True:
            n += 1
            at = line_at(pos)
            try:
                item, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"malformed JSON array ({exc.msg} at column {exc.colno})", path=path, line=exc.lineno
                ) from None
            except RecursionError:
                raise InputError(
                    f"JSON nested too deeply (more than {MAX_DEPTH} levels is refused)", path=path, line=at
                ) from None
            except ValueError as exc:
                raise InputError(f"unreadable JSON value ({exc})", path=path, line=at) from None
            if not isinstance(item, dict):
                raise InputError(f"array item {n} must be an object, got {type_name(item)}", path=path, line=at)
            yield at, item
            pos = skip(end)
            if pos < size and text[pos] == ",":
                pos = skip(pos + 1)
                continue
            if pos < size and text[pos] == "]":
                pos = skip(pos + 1)
                break
            found = "the end of the file" if pos >= size else repr(text[pos])
            raise InputError(f"malformed JSON array (expected ',' or ']', found {found})", path=path, line=line_at(pos))
    if pos < size:
        raise InputError("malformed JSON array (extra data after the closing ']')", path=path, line=line_at(pos))
