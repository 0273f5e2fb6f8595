"""Recorded conversations: read transcripts people already had with an assistant, one conversation at a time.

`read_transcripts(path)` streams `RecordedConversation`s from one of three forms:

- **JSONL** (`.jsonl`, `.ndjson`): one conversation a line, OpenAI chat `messages` plus optional `id`, `model`,
  `language`, `locale` and `metadata`. System messages stay out of the turns (their text is kept in
  `metadata["system"]`); tool and function messages are refused. mheval's own `export --format messages` reads
  back: its `metadata.scenario_id` is the id, its `metadata.model`, `sample`, `language` and `locale` are used
  when the line has no top-level value.
- **Plain text** (a folder of `*.txt`, or one `.txt` file): one conversation a file, each turn introduced by a
  role prefix at the start of a line (`user:`, `human:`, `assistant:`, `agent:`, `bot:` by default,
  case-insensitive, `:` or `：`); a turn runs until the next prefix.
- **CSV / Parquet** (`.csv`, `.parquet`): one row a turn, with a conversation id, a turn index, a role and the
  content; the rows of one conversation together, ordered by the turn index within it.

Every problem is an `InputError` naming the file, the line (or row) and the field; given `on_bad`, a bad
conversation is handed to it instead and reading goes on (`--skip-bad`). Nothing here stores or judges: the
conversations are handed on one by one, each checked whole before it is yielded (conversations/imported.py
makes them a run's conversations).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mheval.errors import InputError
from mheval.records import Turn
from mheval.suites.readers import check_file, check_text, json_safe, parse_json

Side = Literal["user", "assistant"]

DEFAULT_ROLES: dict[Side, tuple[str, ...]] = {
    "user": ("user", "human"),
    "assistant": ("assistant", "agent", "bot"),
}
"""The role names read when no mapping is given, per side (case-insensitive)."""

JSONL_SUFFIXES = (".jsonl", ".ndjson")
CSV_SUFFIXES = (".csv",)
PARQUET_SUFFIXES = (".parquet",)
TEXT_SUFFIXES = (".txt",)
SUFFIXES = (*JSONL_SUFFIXES, *CSV_SUFFIXES, *PARQUET_SUFFIXES, *TEXT_SUFFIXES)

JSONL_KEYS = ("id", "messages", "model", "language", "locale", "metadata")
"""The keys a JSONL line may have; anything else belongs under `metadata`."""

# The column names a table may use, in order of preference (matched case-insensitively).
COLUMNS: dict[str, tuple[str, ...]] = {
    "conversation_id": ("conversation_id", "id", "session_id"),
    "turn": ("turn", "turn_index", "index"),
    "role": ("role", "speaker"),
    "content": ("content", "text", "message"),
}

CSV_CHUNK_ROWS = 10_000
"""Rows read from a CSV at a time: memory holds one chunk and the conversation being built."""

PARQUET_BATCH_ROWS = 10_000

_REFUSED_ROLES = ("tool", "function", "ipython")

OnBad = Callable[[InputError, str | None], None]
"""Told of a bad conversation that is skipped: the error, and the id of a conversation read before that
it makes bad too (None when there is none)."""
_WHOLE = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class RecordedConversation:
    """One conversation as it was recorded: the user's and the assistant's turns, in order.

    `source` names where it was read (`file:line` for JSONL, `file:row` of its first row for a table,
    `file:line` of its first turn for a transcript). `sample` tells apart several recordings of one id by one
    model (mheval's own export writes one per sample); it is 0 elsewhere.
    """

    id: str
    turns: tuple[Turn, ...]
    model: str | None
    language: str | None
    locale: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    sample: int = 0


# --------------------------------------------------------------------------------------------- roles


def parse_roles(text: str) -> dict[Side, list[str]]:
    """The CLI form `user=Patient,assistant=Bot` (a side may repeat: `user=Patient,user=Client`)."""
    roles: dict[Side, list[str]] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        side, sep, name = part.partition("=")
        side, name = side.strip().lower(), name.strip()
        if not sep or not name:
            raise InputError(f"expected SIDE=NAME, got {part.strip()!r}", field="roles", choices=("user", "assistant"))
        if side not in DEFAULT_ROLES:
            raise InputError(f"unknown side {side!r} in {part.strip()!r}", field="roles", choices=("user", "assistant"))
        roles.setdefault(side, []).append(name)
    if not roles:
        raise InputError("no role given (expected e.g. user=Patient,assistant=Bot)", field="roles")
    return roles


def role_table(roles: Mapping[str, Iterable[str] | str] | None = None) -> dict[str, Side]:
    """Lower-cased role name -> side. A side given in `roles` replaces that side's defaults; a side left out
    keeps them."""
    names: dict[Side, tuple[str, ...]] = dict(DEFAULT_ROLES)
    for side, given in (roles or {}).items():
        if side not in DEFAULT_ROLES:
            raise InputError(f"unknown side {side!r}", field="roles", choices=("user", "assistant"))
        listed = (given,) if isinstance(given, str) else tuple(given)
        clean = tuple(n.strip() for n in listed if isinstance(n, str) and n.strip())
        if not clean or len(clean) != len(listed):
            raise InputError(f"the names for {side!r} must be non-empty strings", field="roles")
        for name in clean:
            if ":" in name or "：" in name or "\n" in name:
                raise InputError(f"role name {name!r} may not hold ':' or a line break", field="roles")
        names[side] = clean
    table: dict[str, Side] = {}
    for side, listed_names in names.items():
        for name in listed_names:
            key = name.casefold()
            if table.get(key, side) != side:
                raise InputError(f"role name {name!r} is given to both user and assistant", field="roles")
            table[key] = side
    return table


def _role_choices(table: Mapping[str, Side]) -> list[str]:
    """The role names a JSONL message or a table row may have."""
    return ["system", "user", "assistant", *(name for name in table if name not in DEFAULT_ROLES)]


# --------------------------------------------------------------------------------------------- entry


def read_transcripts(
    path: str | Path,
    *,
    roles: Mapping[str, Iterable[str] | str] | None = None,
    model_name: str | None = None,
    on_bad: OnBad | None = None,
) -> Iterator[RecordedConversation]:
    """Stream the conversations recorded at `path` (the form is chosen by the suffix; a folder holds `.txt`).

    The model of a conversation is the record's, else `model_name`, else the file's stem (a folder's name for
    a folder of transcripts). A generator: nothing is read, and nothing refused, until the first conversation
    is asked for; an `InputError` stops it at the first bad input, after the good conversations before it.

    With `on_bad`, a bad conversation is handed to it instead (the error, and the id of a conversation read
    before that the error makes bad too: a table's conversation whose rows reappear later) and reading goes
    on with the next one; a file that cannot be read at all (no header, malformed CSV, not Parquet) still
    raises.
    """
    path = Path(path)
    table = role_table(roles)
    if model_name is not None and not model_name.strip():
        raise InputError("model name is empty", field="model_name")
    if path.is_dir():
        yield from _read_text_folder(path, table, model_name, on_bad)
        return
    check_file(path)
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        yield from _read_jsonl(path, table, model_name, on_bad)
        return
    if suffix in CSV_SUFFIXES:
        yield from _read_csv(path, table, model_name, on_bad)
        return
    if suffix in PARQUET_SUFFIXES:
        yield from _read_parquet(path, table, model_name, on_bad)
        return
    if suffix in TEXT_SUFFIXES:
        yield from _read_text_files([path], path.stem, table, model_name, on_bad)
        return
    raise InputError(
        f"cannot tell the transcript format from the suffix {suffix or '(none)'!r}", path=path, choices=SUFFIXES
    )


def _lines(path: Path, on_bad: OnBad | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text without its line break), one line at a time; invalid UTF-8 names its line (and
    with `on_bad`, the line is handed to it and skipped)."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", path=path) from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = exc.start
            else:
                yield number, text.rstrip("\r\n")
                continue
            message = f"not UTF-8 (byte 0x{raw[bad]:02x} at column {bad + 1}); re-save the file as UTF-8"
            _skip_or_raise(InputError(message, path=path, line=number), on_bad)


def _skip_or_raise(error: InputError, on_bad: OnBad | None, retract: str | None = None) -> None:
    """A bad conversation (or line): raised when no `on_bad` was given (the strict default), else handed to
    it, and the caller skips it. `retract` names a conversation already handed on that the error spoils."""
    if on_bad is None:
        raise error
    on_bad(error, retract)


def _finish(
    turns: list[Turn], *, path: Path, line: int | None, field: str, table: Mapping[str, Side] | None = None
) -> tuple[Turn, ...]:
    """The turns of a conversation, refused when one side never speaks (a greeting first is allowed)."""
    sides = {t.role for t in turns}
    for side in ("assistant", "user"):
        if side not in sides:
            names = [n for n, s in (table or {}).items() if s == side]
            hint = f" (no turn with the role {', '.join(names)})" if names else ""
            raise InputError(f"the conversation has no {side} turn{hint}", path=path, line=line, field=field)
    return tuple(turns)


class _Seen:
    """The conversations read so far from one input, to refuse a second one of the same identity."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where: dict[tuple[str, str | None, int], int] = {}

    def add(self, key: tuple[str, str | None, int], line: int, field: str, unit: str = "line") -> None:
        first = self.where.get(key)
        if first is not None:
            conv_id, model, sample = key
            who = f" (model {model}, sample {sample})" if model is not None else ""
            raise InputError(
                f"duplicate conversation id {conv_id!r}{who}: already read at {unit} {first}",
                path=self.path,
                line=line,
                field=field,
            )
        self.where[key] = line


# --------------------------------------------------------------------------------------------- JSONL


def _read_jsonl(
    path: Path, table: Mapping[str, Side], model_name: str | None, on_bad: OnBad | None = None
) -> Iterator[RecordedConversation]:
    seen = _Seen(path)
    for number, text in _lines(path, on_bad):
        if not text.strip(" \t\r\n"):
            continue
        try:
            record = parse_json(text, path=path, line=number, constants=False)
            conversation, key, key_field = _jsonl_conversation(record, path, number, table, model_name)
            seen.add(key, number, key_field)
        except InputError as exc:
            _skip_or_raise(exc, on_bad)
            continue
        yield conversation


def _optional_str(record: Mapping[str, Any], key: str, path: Path, line: int, field: str) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"must be a non-empty string, got {value!r}", path=path, line=line, field=field)
    check_text(value, path=path, line=line, field=field)
    return value


def _jsonl_conversation(
    record: Any, path: Path, line: int, table: Mapping[str, Side], model_name: str | None
) -> tuple[RecordedConversation, tuple[str, str | None, int], str]:
    if not isinstance(record, dict):
        raise InputError(f"a line must be a JSON object, got {type(record).__name__}", path=path, line=line)
    for key in record:
        if key not in JSONL_KEYS:
            raise InputError(
                "unknown key (put extra data under metadata)", path=path, line=line, field=key, choices=JSONL_KEYS
            )
    metadata = record.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise InputError(f"must be an object, got {type(metadata).__name__}", path=path, line=line, field="metadata")
    metadata = json_safe(metadata, path=path, line=line, field="metadata")

    # The id: the line's own, else the scenario of mheval's export, else the file and line.
    conv_id: str
    id_field = "id"
    raw_id = record.get("id")
    if raw_id is None and metadata.get("scenario_id") is not None:
        raw_id, id_field = metadata["scenario_id"], "metadata.scenario_id"
    if raw_id is None:
        conv_id = f"{path.stem}-{line}"
    elif isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
        raise InputError(
            f"must be a non-empty string or an integer, got {raw_id!r}", path=path, line=line, field=id_field
        )
    else:
        conv_id = str(raw_id)
        check_text(conv_id, path=path, line=line, field=id_field)

    model = _optional_str(record, "model", path, line, "model")
    if model is None:
        model = _optional_str(metadata, "model", path, line, "metadata.model")
    language = _optional_str(record, "language", path, line, "language")
    if language is None:
        language = _optional_str(metadata, "language", path, line, "metadata.language")
    locale = _optional_str(record, "locale", path, line, "locale")
    if locale is None:
        locale = _optional_str(metadata, "locale", path, line, "metadata.locale")
    sample = metadata.get("sample", 0)
    if sample is None:
        sample = 0
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise InputError(
            f"must be a whole number from 0, got {sample!r}", path=path, line=line, field="metadata.sample"
        )

    messages = record.get("messages")
    if messages is None:
        raise InputError("missing: the conversation's chat messages", path=path, line=line, field="messages")
    if not isinstance(messages, list) or not messages:
        raise InputError("must be a non-empty list of {role, content} objects", path=path, line=line, field="messages")
    turns: list[Turn] = []
    system: list[str] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise InputError(f"must be an object, got {type(message).__name__}", path=path, line=line, field=where)
        role = message.get("role")
        if not isinstance(role, str) or not role.strip():
            raise InputError(
                f"missing or not a string: {role!r}",
                path=path,
                line=line,
                field=f"{where}.role",
                choices=_role_choices(table),
            )
        name = role.strip().casefold()
        if name in _REFUSED_ROLES:
            raise InputError(
                f"{role!r} turns are not read: mheval judges what the person and the assistant said to each other; "
                "remove tool calls and results (or fold what matters into the assistant's text)",
                path=path,
                line=line,
                field=f"{where}.role",
            )
        content = message.get("content")
        if not isinstance(content, str):
            kind = "null" if content is None else type(content).__name__
            raise InputError(f"must be a string, got {kind}", path=path, line=line, field=f"{where}.content")
        check_text(content, path=path, line=line, field=f"{where}.content")
        if name == "system":
            system.append(content)
            continue
        side = _side(name, table)
        if side is None:
            raise InputError(
                f"unknown role {role!r}", path=path, line=line, field=f"{where}.role", choices=_role_choices(table)
            )
        if not content.strip():
            raise InputError(f"empty {side} turn", path=path, line=line, field=f"{where}.content")
        turns.append(Turn(role=side, content=content))
    if system:
        metadata["system"] = "\n\n".join(system)
    conversation = RecordedConversation(
        id=conv_id,
        turns=_finish(turns, path=path, line=line, field="messages"),
        model=model or model_name or path.stem,
        language=language,
        locale=locale,
        metadata=metadata,
        source=f"{path}:{line}",
        sample=sample,
    )
    return conversation, (conversation.id, conversation.model, sample), id_field


def _side(name: str, table: Mapping[str, Side]) -> Side | None:
    """A structured record's role: the canonical names, or a name of the role table."""
    if name in ("user", "assistant"):
        return name  # type: ignore[return-value]
    return table.get(name)


# --------------------------------------------------------------------------------------------- text


def _prefix_pattern(table: Mapping[str, Side]) -> re.Pattern[str]:
    names = sorted(table, key=len, reverse=True)  # "bot" must not win over "bot helper"
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"^({alternatives})[ \t]*[:：]", re.IGNORECASE)


def _read_text_folder(
    folder: Path, table: Mapping[str, Side], model_name: str | None, on_bad: OnBad | None = None
) -> Iterator[RecordedConversation]:
    files = sorted(
        p for p in folder.iterdir() if p.suffix.lower() in TEXT_SUFFIXES and not p.name.startswith(".") and p.is_file()
    )
    if not files:
        raise InputError("no .txt transcripts in this folder", path=folder)
    return _read_text_files(files, folder.name, table, model_name, on_bad)


def _read_text_files(
    files: list[Path], default_model: str, table: Mapping[str, Side], model_name: str | None,
    on_bad: OnBad | None = None,
) -> Iterator[RecordedConversation]:  # fmt: skip
    for path in files:
        try:
            conversation = _read_text_file(path, default_model, table, model_name)
        except InputError as exc:
            _skip_or_raise(exc, on_bad)
            continue
        yield conversation


def _read_text_file(
    path: Path, default_model: str, table: Mapping[str, Side], model_name: str | None
) -> RecordedConversation:
    """One transcript file, read whole (a transcript is one conversation: it is checked before it is handed on)."""
    pattern = _prefix_pattern(table)
    prefixes = ", ".join(f"{n}:" for n in table)
    turns: list[Turn] = []
    current: tuple[Side, int, list[str]] | None = None
    first_line: int | None = None
    for number, text in _lines(path):
        match = pattern.match(text)
        if match:
            if current is not None:
                turns.append(_text_turn(*current, path=path))
            current = (table[match.group(1).casefold()], number, [text[match.end() :]])
            if first_line is None:
                first_line = number
        elif current is not None:
            current[2].append(text)
        elif text.strip():
            raise InputError(
                "text before the first turn: every turn starts with a role prefix at the start of a line",
                path=path,
                line=number,
                field="role",
                choices=[f"{n}:" for n in table],
            )
    if current is not None:
        turns.append(_text_turn(*current, path=path))
    if not turns:
        raise InputError(f"no turns: no line starts with a role prefix ({prefixes})", path=path, field="role")
    return RecordedConversation(
        id=path.stem,
        turns=_finish(turns, path=path, line=None, field="role", table=table),
        model=model_name or default_model,
        language=None,
        locale=None,
        metadata={},
        source=f"{path}:{first_line}",
    )


def _text_turn(side: Side, start: int, lines: list[str], *, path: Path) -> Turn:
    """A transcript's turn: its lines joined, inner blank lines kept, outer whitespace stripped."""
    content = "\n".join(lines).strip()
    if not content:
        raise InputError(f"empty {side} turn", path=path, line=start, field="content")
    check_text(content, path=path, line=start, field="content")
    return Turn(role=side, content=content)


# --------------------------------------------------------------------------------------------- tables

# A row of a table: (row number, conversation id, turn index, role, content), values as read.
_Row = tuple[int, Any, Any, Any, Any]


def _columns(names: Iterable[str], path: Path) -> dict[str, str]:
    """Our column -> the table's column name (the first accepted name present, case-insensitively)."""
    present: dict[str, str] = {}
    for name in names:
        present.setdefault(str(name).strip().casefold(), str(name))
    found: dict[str, str] = {}
    for ours, accepted in COLUMNS.items():
        for candidate in accepted:
            if candidate in present:
                found[ours] = present[candidate]
                break
        else:
            raise InputError(
                f"missing column for the {ours.replace('_', ' ')}", path=path, line=1, field=ours, choices=accepted
            )
    return found


def _read_csv(
    path: Path, table: Mapping[str, Side], model_name: str | None, on_bad: OnBad | None = None
) -> Iterator[RecordedConversation]:
    import pandas as pd

    errors = (pd.errors.ParserError, ValueError)
    try:
        header = pd.read_csv(path, dtype=str, nrows=0, encoding="utf-8").columns
        reader = pd.read_csv(
            path, dtype=str, keep_default_na=False, skip_blank_lines=False, chunksize=CSV_CHUNK_ROWS, encoding="utf-8"
        )
    except pd.errors.EmptyDataError:
        raise InputError("file is empty (no header row)", path=path, line=1) from None
    except UnicodeDecodeError:
        raise _utf8_error(path) from None
    except errors as exc:
        raise InputError(f"malformed CSV ({exc})", path=path, line=_parser_line(exc)) from None
    cols = _columns(header, path)
    order = [cols["conversation_id"], cols["turn"], cols["role"], cols["content"]]

    def rows() -> Iterator[_Row]:
        number = 1  # the header is row 1, so a row's number is its line when no cell spans lines
        with reader:
            while True:
                try:
                    chunk = next(reader)
                except StopIteration:
                    return
                except UnicodeDecodeError:
                    raise _utf8_error(path) from None
                except errors as exc:
                    raise InputError(f"malformed CSV ({exc})", path=path, line=_parser_line(exc)) from None
                blank = (chunk == "").all(axis=1).tolist()
                for empty, values in zip(blank, chunk[order].itertuples(index=False, name=None), strict=True):
                    number += 1
                    if not empty:  # a blank line is skipped (and counted)
                        yield (number, *values)

    yield from _group(rows(), path, table, model_name, cols, on_bad)


def _parser_line(exc: Exception) -> int | None:
    found = re.search(r"line (\d+)", str(exc))
    return int(found.group(1)) if found else None


def _utf8_error(path: Path) -> InputError:
    """The first line of `path` that is not UTF-8, found by reading it again line by line."""
    try:
        for _ in _lines(path):
            pass
    except InputError as exc:
        return exc
    return InputError("not UTF-8; re-save the file as UTF-8", path=path)


def _read_parquet(
    path: Path, table: Mapping[str, Side], model_name: str | None, on_bad: OnBad | None = None
) -> Iterator[RecordedConversation]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("reading Parquet needs pyarrow (pip install pyarrow)", path=path) from None

    try:
        handle = pq.ParquetFile(path)
        cols = _columns(handle.schema_arrow.names, path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", path=path) from None

    def rows() -> Iterator[_Row]:
        order = [cols["conversation_id"], cols["turn"], cols["role"], cols["content"]]
        number = 0  # Parquet has no header row: a row's number counts the data rows from 1
        try:
            batches = handle.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=order)
            for batch in batches:
                columns = [batch.column(name).to_pylist() for name in order]
                for conv_id, turn, role, content in zip(*columns, strict=True):
                    number += 1
                    yield number, conv_id, turn, role, content
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the rows after row {number} ({exc})", path=path) from None
        finally:
            handle.close()

    return _group(rows(), path, table, model_name, cols, on_bad)


def _group(
    rows: Iterator[_Row], path: Path, table: Mapping[str, Side], model_name: str | None, names: Mapping[str, str],
    on_bad: OnBad | None = None,
) -> Iterator[RecordedConversation]:  # fmt: skip
    """Conversations from rows in which each conversation's rows are together (in any turn order).

    With `on_bad`, a conversation with a bad row is handed to it whole and skipped (its other rows too); a
    row whose conversation id cannot be read drops the conversation being read, which it may belong to."""
    field_of = {ours: names.get(ours, ours) for ours in COLUMNS}
    ended: dict[str, int] = {}  # conversation id -> its last row
    current_id: str | None = None
    first_row = last_row = 0
    current: list[tuple[int, int, Side | Literal["system"], str]] = []  # (turn index, row, side, content)
    failed: InputError | None = None  # the first bad row of the conversation being read
    retract: str | None = None  # its id, when its rows reappear: the part read before is bad too

    def build(conv_id: str) -> RecordedConversation:
        current.sort(key=lambda item: item[0])
        for before, after in itertools.pairwise(current):
            if before[0] == after[0]:
                raise InputError(
                    f"turn index {after[0]} of conversation {conv_id!r} is also on row {min(before[1], after[1])}",
                    path=path,
                    line=max(before[1], after[1]),
                    field=field_of["turn"],
                )
        turns = [Turn(role=side, content=content) for _, _, side, content in current if side != "system"]
        system = [content for _, _, side, content in current if side == "system"]
        return RecordedConversation(
            id=conv_id,
            turns=_finish(turns, path=path, line=first_row, field=field_of["role"], table=table),
            model=model_name or path.stem,
            language=None,
            locale=None,
            metadata={"system": "\n\n".join(system)} if system else {},
            source=f"{path}:{first_row}",
        )

    def close() -> RecordedConversation | None:
        """The conversation just read, or None when it was bad (and `on_bad` was told)."""
        assert current_id is not None
        ended[current_id] = last_row
        try:
            if failed is not None:
                raise failed
            return build(current_id)
        except InputError as exc:
            _skip_or_raise(exc, on_bad, retract)
            return None

    for number, raw_id, raw_turn, raw_role, raw_content in rows:
        try:
            conv_id = _table_id(raw_id, path, number, field_of["conversation_id"])
        except InputError as exc:
            if on_bad is None:
                raise
            failed, last_row = failed or exc, number
            continue
        if conv_id != current_id:
            if current_id is not None:
                done = close()
                if done is not None:
                    yield done
            current_id, first_row, current, failed, retract = conv_id, number, [], None, None
            if conv_id in ended:
                error = InputError(
                    f"conversation {conv_id!r} reappears after other conversations (its rows ended at row "
                    f"{ended[conv_id]}): the rows of one conversation must be together",
                    path=path,
                    line=number,
                    field=field_of["conversation_id"],
                )
                if on_bad is None:
                    raise error
                failed, retract = error, conv_id
        last_row = number
        if failed is not None:
            continue
        try:
            current.append(_table_row(number, raw_turn, raw_role, raw_content, path, table, field_of))
        except InputError as exc:
            if on_bad is None:
                raise
            failed = exc
    if current_id is not None:
        done = close()
        if done is not None:
            yield done


def _table_row(
    number: int, raw_turn: Any, raw_role: Any, raw_content: Any, path: Path, table: Mapping[str, Side],
    field_of: Mapping[str, str],
) -> tuple[int, int, Side | Literal["system"], str]:  # fmt: skip
    turn = _table_turn(raw_turn, path, number, field_of["turn"])
    side = _table_side(raw_role, path, number, field_of["role"], table)
    what = "system text" if side == "system" else f"{side} turn"
    if not isinstance(raw_content, str):
        kind = "empty" if raw_content is None else f"not text ({type(raw_content).__name__})"
        raise InputError(f"{kind} {what}", path=path, line=number, field=field_of["content"])
    if not raw_content.strip():
        raise InputError(f"empty {what}", path=path, line=number, field=field_of["content"])
    check_text(raw_content, path=path, line=number, field=field_of["content"])
    return (turn, number, side, raw_content)


def _table_id(value: Any, path: Path, row: int, field: str) -> str:
    if isinstance(value, bool) or value is None or (isinstance(value, float) and math.isnan(value)):
        raise InputError("missing conversation id", path=path, line=row, field=field)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value)
    if not text.strip():
        raise InputError("missing conversation id", path=path, line=row, field=field)
    check_text(text, path=path, line=row, field=field)
    return text


def _table_turn(value: Any, path: Path, row: int, field: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        return int(value.strip())
    raise InputError(f"turn index must be a whole number, got {value!r}", path=path, line=row, field=field)


def _table_side(value: Any, path: Path, row: int, field: str, table: Mapping[str, Side]) -> Side | Literal["system"]:
    """The row's side, or "system" (kept out of the turns); tool rows and unknown roles are refused."""
    name = value.strip().casefold() if isinstance(value, str) else ""
    if name == "system":
        return "system"
    if name in _REFUSED_ROLES:
        raise InputError(
            f"{value!r} rows are not read: mheval judges what the person and the assistant said",
            path=path,
            line=row,
            field=field,
        )
    side = _side(name, table)
    if side is None:
        raise InputError(f"unknown role {value!r}", path=path, line=row, field=field, choices=_role_choices(table))
    return side
