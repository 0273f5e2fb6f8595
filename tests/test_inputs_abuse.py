"""Hostile and odd input files: every reader either loads them or refuses with an InputError naming
the file and the line (the CLI turns that into exit code 2), never another exception.

Three parts: an explicit grid of malformed files (each one a way a reader used to crash or to read
something else than was written), property-based round trips through mheval's own export, and
property-based fuzzing with arbitrary and mutated bytes. Every fixture is generated here.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mheval.errors import InputError
from mheval.records import CRISIS_LABELS, Case, Response, Turn
from mheval.runfolder.export import export_table
from mheval.runfolder.store import Store
from mheval.suites import load_suite
from mheval.suites.readers import MAX_DEPTH
from mheval.suites.responses import read_responses

GOOD = b'{"id": "a", "text": "I feel fine today, just tired."}\n'


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def _parquet_bad_utf8(path: Path) -> None:
    # A string column whose second value is not UTF-8: Arrow writes it unchecked when viewed from binary.
    text = pa.array([b"a calm day", b"\xff\xfe broken"], type=pa.binary()).view(pa.string())
    pq.write_table(pa.table({"id": ["a", "b"], "text": text}), path)


def _parquet_binary(path: Path) -> None:
    pq.write_table(pa.table({"id": ["a"], "text": pa.array([b"bytes"], type=pa.binary())}), path)


def _parquet_duplicate_columns(path: Path) -> None:
    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["hi"]), pa.array(["ho"])], names=["id", "text", "text"])
    pq.write_table(table, path)


def _xlsx_damaged(path: Path) -> None:
    import zipfile

    with zipfile.ZipFile(path, "w") as z:  # a zip, as .xlsx is, holding no workbook
        z.writestr("xl/workbook.xml", "<not a workbook")


def _xlsx_fractional_convid(path: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    book.active.append(["ConvID", "context"])
    book.active.append([1, "I cannot sleep."])
    book.active.append([2.5, "Nor can I."])
    book.save(path)


Writer = bytes | Callable[[Path], None]

# (case name, suite format, file name, content, expected line, expected field, a fragment of the message)
BAD: list[tuple[str, str, str, Writer, int | None, str | None, str]] = [
    # -- JSON Lines
    (
        "jsonl-nested-100k",
        "jsonl",
        "d.jsonl",
        b'{"id": "a", "text": "x", "m": ' + _deep(100_000).encode() + b"}\n",
        1,
        None,
        "nested too deeply",
    ),
    (
        "jsonl-nested-over-cap",
        "jsonl",
        "d.jsonl",
        GOOD + b'{"id": "b", "text": "x", "metadata": {"k": ' + _deep(MAX_DEPTH + 2).encode() + b"}}\n",
        2,
        "metadata",
        "levels deep",
    ),
    (
        "jsonl-lone-surrogate",
        "jsonl",
        "s.jsonl",
        GOOD + b'{"id": "b", "text": "hi \\ud800 there"}\n',
        2,
        "text",
        "surrogate",
    ),
    ("jsonl-surrogate-key", "jsonl", "s.jsonl", b'{"id": "a", "text": "x", "\\udc00": 1}\n', 1, None, "surrogate"),
    (
        "jsonl-huge-integer",
        "jsonl",
        "i.jsonl",
        b'{"id": "a", "text": "x", "n": ' + b"9" * 5000 + b"}\n",
        1,
        None,
        "JSON",
    ),
    ("jsonl-not-object", "jsonl", "n.jsonl", GOOD + b"[1, 2]\n", 2, None, "JSON object"),
    ("jsonl-only-line-separator", "jsonl", "l.jsonl", GOOD + "\u2028\n".encode(), 2, None, "malformed JSON"),
    (
        "jsonl-not-utf8-line-3",
        "jsonl",
        "u.jsonl",
        GOOD + GOOD.replace(b'"a"', b'"b"') + b'{"id": "c\xff"}\n',
        3,
        None,
        "UTF-8",
    ),
    ("jsonl-truncated", "jsonl", "t.jsonl", GOOD + b'{"id": "b", "text": "cut', 2, None, "malformed JSON"),
    (
        "jsonl-turns-not-ending-on-user",
        "jsonl",
        "r.jsonl",
        b'{"id": "a", "turns": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}\n',
        1,
        "turns",
        "user turn",
    ),
    # -- CSV
    ("csv-unclosed-quote", "csv", "q.csv", b'id,text\na,"never closed\nb,second\nc,third\n', 2, None, "never closed"),
    ("csv-stray-quote", "csv", "q.csv", b'id,text\na,"quoted"tail\n', 2, None, "stray quote"),
    ("csv-extra-cell", "csv", "x.csv", b"id,text\na,hi\nb,hi,extra\n", 3, None, "cells"),
    (
        "csv-turns-nested",
        "csv",
        "n.csv",
        b'id,turns\na,"' + _deep(100_000).encode() + b'"\n',
        2,
        "turns",
        "nested too deeply",
    ),
    (
        "csv-turns-surrogate",
        "csv",
        "s.csv",
        b'id,turns\na,"[{""role"": ""user"", ""content"": ""\\ud83d""}]"\n',
        2,
        "turns[0].content",
        "surrogate",
    ),
    (
        "csv-metadata-huge-int",
        "csv",
        "m.csv",
        b'id,text,metadata\na,hi,"{""n"": ' + b"7" * 5000 + b'}"\n',
        2,
        "metadata",
        "JSON",
    ),
    ("csv-not-utf8", "csv", "u.csv", b"id,text\na,caf\xe9\n", 2, None, "UTF-8"),
    # -- Parquet (the line is the row)
    ("parquet-not-utf8", "parquet", "bad.parquet", _parquet_bad_utf8, 2, "text", "UTF-8"),
    ("parquet-binary-column", "parquet", "bin.parquet", _parquet_binary, 1, "text", "binary"),
    ("parquet-duplicate-columns", "parquet", "dup.parquet", _parquet_duplicate_columns, None, "text", "duplicate"),
    ("parquet-not-parquet", "parquet", "junk.parquet", b"PAR1 this is not parquet", None, None, "Parquet"),
    # -- the papers' formats
    ("help-harm-array-nested-100k", "help-harm", "deep.json", _deep(100_000).encode(), 1, None, "nested too deeply"),
    (
        "help-harm-array-bad-item-line",
        "help-harm",
        "a.json",
        b'[\n  {"dataset_id": "d", "inputs": ["One."]},\n\n  {"dataset_id": "d", "inputs": ["Two."],}\n]\n',
        4,
        None,
        "malformed JSON array",
    ),
    (
        "help-harm-array-trailing-data",
        "help-harm",
        "a.json",
        b'[{"dataset_id": "d", "inputs": ["One."]}]\n{}\n',
        2,
        None,
        "extra data",
    ),
    (
        "help-harm-array-item-not-object",
        "help-harm",
        "a.json",
        b'[\n {"dataset_id": "d", "inputs": ["x"]},\n 7\n]',
        3,
        None,
        "must be an object",
    ),
    (
        "help-harm-inputs-not-list",
        "help-harm",
        "h.jsonl",
        b'{"dataset_id": "d", "inputs": "text"}\n',
        1,
        "inputs",
        "list of sentences",
    ),
    (
        "help-harm-empty-inputs",
        "help-harm",
        "h.jsonl",
        b'{"dataset_id": "d", "inputs": ["  "]}\n',
        1,
        "inputs",
        "no sentence",
    ),
    (
        "help-harm-dataset-id-object",
        "help-harm",
        "h.jsonl",
        b'{"dataset_id": {"x": 1}, "inputs": ["a"]}\n',
        1,
        "dataset_id",
        "string",
    ),
    (
        "help-harm-derived-id-clash",
        "help-harm",
        "h.jsonl",
        b'{"id": "d-0002", "dataset_id": "d", "inputs": ["a"]}\n{"dataset_id": "d", "inputs": ["b"]}\n',
        2,
        "id",
        "duplicate id",
    ),
    (
        "dialogue-safety-text-before-marker",
        "dialogue-safety",
        "ds.jsonl",
        '{"id": 1, "context": "你好[seeker]我很难过"}\n'.encode(),
        1,
        "context",
        "[seeker]/[supporter]",
    ),
    (
        "dialogue-safety-label-out-of-range",
        "dialogue-safety",
        "ds.jsonl",
        '{"id": 1, "context": "[seeker]我很难过", "label": 9}\n'.encode(),
        1,
        "label",
        "0..7",
    ),
    (
        "dialogue-safety-id-object",
        "dialogue-safety",
        "ds.jsonl",
        '{"id": {"a": 1}, "context": "[seeker]我很难过"}\n'.encode(),
        1,
        "id",
        "string or integer",
    ),
    ("mentalalign-damaged-xlsx", "mentalalign", "m.xlsx", _xlsx_damaged, None, None, "xlsx"),
    ("mentalalign-fractional-convid", "mentalalign", "m.xlsx", _xlsx_fractional_convid, 3, "ConvID", "whole number"),
]


def _write(path: Path, content: Writer) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        content(path)
    return path


@pytest.mark.parametrize(
    ("fmt", "name", "content", "line", "field", "needle"), [pytest.param(*row[1:], id=row[0]) for row in BAD]
)
def test_bad_file_is_one_input_error(
    tmp_path: Path, fmt: str, name: str, content: Writer, line: int | None, field: str | None, needle: str
) -> None:
    path = _write(tmp_path / name, content)
    with pytest.raises(InputError) as info:
        load_suite(f"{fmt}:{path}")
    err = info.value
    assert err.path == str(path), str(err)
    assert (err.line, err.field) == (line, field), str(err)
    assert needle in str(err)
    assert str(err).startswith(str(path) + (f":{line}" if line is not None else ""))


# (case name, file content, expected line, expected field, a fragment of the message)
BAD_RESPONSES: list[tuple[str, bytes, int | None, str | None, str]] = [
    ("not-utf8", b'{"case_id": "a", "model": "m", "text": "ok"}\n{"case_id": "b\xff"}\n', 2, None, "UTF-8"),
    (
        "nested-100k",
        b'{"case_id": "a", "model": "m", "text": "x", "u": ' + _deep(100_000).encode() + b"}\n",
        1,
        None,
        "nested too deeply",
    ),
    ("missing-text", b'{"case_id": "a", "model": "m"}\n', 1, "text", "missing"),
    ("text-a-number", b'{"case_id": "a", "model": "m", "text": 5}\n', 1, "text", "string"),
    ("negative-sample", b'{"case_id": "a", "model": "m", "text": "x", "sample": -1}\n', 1, "sample", ">= 0"),
    ("empty-model", b'{"case_id": "a", "model": " ", "text": "x"}\n', 1, "model", "non-empty"),
    (
        "same-reply-twice",
        b'{"case_id": "a", "model": "m", "text": "x"}\n{"case_id": "a", "model": "m", "text": "y"}\n',
        2,
        "sample",
        "second reply",
    ),
    ("lone-surrogate", b'{"case_id": "a", "model": "m", "text": "\\udfff"}\n', 1, "text", "surrogate"),
    (
        "bad-usage",
        b'{"case_id": "a", "model": "m", "text": "x", "usage": {"prompt_tokens": "many"}}\n',
        1,
        "usage.prompt_tokens",
        "integer",
    ),
    ("only-blank-lines", b"\n  \n\r\n", None, None, "no responses"),
]


@pytest.mark.parametrize(("content", "line", "field", "needle"), [pytest.param(*r[1:], id=r[0]) for r in BAD_RESPONSES])
def test_bad_responses_file(tmp_path: Path, content: bytes, line: int | None, field: str | None, needle: str) -> None:
    path = tmp_path / "replies.jsonl"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        read_responses(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), line, field), str(info.value)
    assert needle in str(info.value)


def test_responses_file_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="directory"):
        read_responses(tmp_path)


def test_responses_with_bom_crlf_and_separators_in_text(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    rows = [
        {"case_id": "a", "model": "m", "text": "one\u2028two\x85three\x0cfour"},
        {"case_id": "b", "model": "m", "text": None, "error": "timeout"},
    ]
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(json.dumps(r, ensure_ascii=False).encode() for r in rows))
    got = read_responses(path)
    assert [r.text for r in got] == ["one\u2028two\x85three\x0cfour", None]


def test_parquet_odd_types_become_json_metadata(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(
        pa.table(
            {
                "id": ["a"],
                "text": ["hello"],
                "when": pa.array([dt.datetime(2025, 1, 2, 3, 4, 5)], type=pa.timestamp("s")),
                "amount": pa.array([Decimal("1.25")], type=pa.decimal128(5, 2)),
                "tags": [["x", "y"]],
            }
        ),
        path,
    )
    (case,) = load_suite(f"parquet:{path}").cases
    assert case.metadata == {"when": "2025-01-02T03:04:05", "amount": "1.25", "tags": ["x", "y"]}
    json.dumps(case.metadata)  # what the store will do with it


def test_help_harm_derived_ids_line_up_a_folder(tmp_path: Path) -> None:
    """A help_harm folder whose files carry no ids: inputs and human labels pair by position."""
    inputs = [{"dataset_id": "src_a", "inputs": ["First message."]}, {"dataset_id": "src_b", "inputs": ["Second."]}]
    labels = [
        {"dataset_id": "src_a", "human_labels": {"H1": "no_crisis", "H2": "no_crisis"}},
        {"dataset_id": "src_b", "human_labels": {"H1": "self-harm", "H2": "self-harm"}},
    ]
    (tmp_path / "validation_inputs.dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in inputs))
    (tmp_path / "human_crisis_labels.dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    suite = load_suite(f"help-harm:{tmp_path}")
    assert [(c.id, c.crisis_label) for c in suite.cases] == [("src_a-0001", "no_crisis"), ("src_b-0002", "self-harm")]


# -- round trips through mheval's own export ------------------------------------------------------

# No lone surrogates: they cannot be written as UTF-8, so no valid record holds one.
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
# Line and paragraph separators, NEL and form feeds are exactly what str.splitlines() used to cut on.
_SPICY = st.sampled_from(
    ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\r", "\r\n", '"', ",", "[/x]", "\\", "=", "+", "-", "@", "'"]
)
_RICH_TEXT = st.lists(st.one_of(_TEXT, _SPICY), max_size=5).map("".join)
# The readers strip ids, locales and sources, so a valid one has no whitespace at its ends.
_KEY_TEXT = _RICH_TEXT.filter(lambda s: bool(s) and s == s.strip())
_JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), _RICH_TEXT
)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_RICH_TEXT, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def _cases(draw: st.DrawFn, names: st.SearchStrategy[str] = _KEY_TEXT) -> list[Case]:
    ids = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    cases = []
    for case_id in ids:
        earlier = draw(st.lists(st.tuples(st.sampled_from(["system", "user", "assistant"]), _RICH_TEXT), max_size=3))
        last = draw(_RICH_TEXT.filter(lambda s: bool(s.strip())))
        cases.append(
            Case(
                id=case_id,
                turns=[*(Turn(role=r, content=c) for r, c in earlier), Turn(role="user", content=last)],
                language=draw(st.sampled_from(["en", "zh"])),
                crisis_label=draw(st.none() | st.sampled_from(CRISIS_LABELS)),
                locale=draw(st.none() | names),
                source=draw(st.none() | names),
                metadata=draw(st.dictionaries(_RICH_TEXT, _JSON, max_size=3)),
            )
        )
    return cases


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _export_and_read(fmt: str, cases: list[Case]) -> list[Case]:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        store = Store.open(run)
        try:
            store.put_cases(cases)
            exported = Path(tmp) / f"cases.{fmt}"
            export_table(store, "cases", fmt, exported)
        finally:
            store.close()
        return load_suite(f"{fmt}:{exported}").cases


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@_SETTINGS
@given(cases=_cases())
def test_any_valid_case_round_trips_through_export(fmt: str, cases: list[Case]) -> None:
    assert [c.model_dump() for c in _export_and_read(fmt, cases)] == [c.model_dump() for c in cases]


@_SETTINGS
@given(cases=_cases())
def test_any_valid_case_round_trips_through_csv_export(cases: list[Case]) -> None:
    """Ids such as `=1+2`, `'=x` or one holding a lone CR come back as themselves: the writer quotes every cell
    that holds a row ending, and the reader undoes exactly the guard the writer added."""
    assert [c.model_dump() for c in _export_and_read("csv", cases)] == [c.model_dump() for c in cases]


def test_csv_export_quotes_a_lone_carriage_return() -> None:
    case = Case(id="a\rb", turns=[Turn(role="user", content="hello")])
    assert [c.id for c in _export_and_read("csv", [case])] == ["a\rb"]


def test_csv_export_keeps_a_value_that_looks_guarded() -> None:
    ids = ["'=x", "=x", "''=x", "'hello", "'-3", "-3"]
    cases = [Case(id=i, turns=[Turn(role="user", content="hello")]) for i in ids]
    assert [c.id for c in _export_and_read("csv", cases)] == ids


@_SETTINGS
@given(
    replies=st.lists(
        st.tuples(_KEY_TEXT, _KEY_TEXT, st.integers(0, 3), st.none() | _RICH_TEXT),
        min_size=1,
        max_size=5,
        unique_by=lambda r: r[:3],
    )
)
def test_any_valid_response_round_trips_through_export(replies: list[tuple[str, str, int, str | None]]) -> None:
    responses = [
        Response(case_id=c, model=m, sample=s, text=t, error=None if t is not None else "failed")
        for c, m, s, t in replies
    ]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "run")
        try:
            store.put_responses(responses)
            exported = Path(tmp) / "responses.jsonl"
            export_table(store, "responses", "jsonl", exported)
        finally:
            store.close()
        loaded = read_responses(exported)
    key = lambda r: (r.case_id, r.model, r.sample)  # noqa: E731
    assert sorted((key(r), r.text, r.error) for r in loaded) == sorted((key(r), r.text, r.error) for r in responses)


# -- any bytes: loaded, or one InputError with file and line --------------------------------------

_JSON_TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b",",
    b":",
    b"\n",
    b"\r\n",
    b" ",
    b"\\",
    b'"id"',
    b'"text"',
    b'"turns"',
    b'"role"',
    b'"user"',
    b'"assistant"',
    b'"content"',
    b'"metadata"',
    b'"crisis_label"',
    b'"language"',
    b'"zh"',
    b'"self-harm"',
    b'"hi"',
    b"null",
    b"true",
    b"0",
    b"-1e999",
    b"NaN",
    b"\\ud800",
    b"\\u0000",
    "\u2028".encode(),
    "\x85".encode(),
    "我".encode(),
    b"\xff",
    b"\xef\xbb\xbf",
    b"9" * 4400,
]
_CSV_TOKENS = [
    b"id",
    b"text",
    b"turns",
    b"metadata",
    b"language",
    b"crisis_label",
    b"response",
    b",",
    b'"',
    b'""',
    b"\n",
    b"\r\n",
    b"\r",
    b" ",
    b"hello",
    b"zh",
    b"no_crisis",
    b'[{""role"": ""user"", ""content"": ""x""}]',
    b'{""k"": 1}',
    b'"[{""role"": ""user"", ""content"": ""\\udc00""}]"',
    b"\x00",
    "\u2028".encode(),
    b"\xff",
    b"\xef\xbb\xbf",
    b"=cmd",
]
_VALID_JSONL = (
    b'{"id": "a", "text": "I cannot sleep.", "language": "en"}\n'
    b'{"id": "b", "turns": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, '
    b'{"role": "user", "content": "\xe6\x88\x91"}], "metadata": {"k": [1, 2]}}\n'
)
_VALID_CSV = b'id,text,metadata\na,"two\nlines",\nb,plain,"{""k"": 1}"\n'


@st.composite
def _mutated(draw: st.DrawFn, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        chunk = draw(st.binary(min_size=1, max_size=3) | st.sampled_from([b'"', b"\n", b"{", b"]", b"\\", b","]))
        if action == "insert":
            data[pos:pos] = chunk
        elif action == "delete":
            del data[pos : pos + len(chunk)]
        else:
            data[pos : pos + len(chunk)] = chunk
    return bytes(data)


def _any_bytes(tokens: list[bytes], valid: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=300),
        st.lists(st.sampled_from(tokens), max_size=40).map(b"".join),
        _mutated(valid),
    )


def _loads_or_refuses(fmt: str, suffix: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fuzz{suffix}"
        path.write_bytes(data)
        try:
            suite = load_suite(f"{fmt}:{path}")
        except InputError as err:
            assert err.path == str(path), str(err)
            assert err.line is not None or "has no cases" in err.message, str(err)
            return
        for case in suite.cases:  # what loads is fit for the store
            json.dumps(case.model_dump(), ensure_ascii=False).encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(data=_any_bytes(_JSON_TOKENS, _VALID_JSONL))
def test_any_bytes_as_jsonl(data: bytes) -> None:
    _loads_or_refuses("jsonl", ".jsonl", data)


@settings(max_examples=300, deadline=None)
@given(data=_any_bytes(_CSV_TOKENS, _VALID_CSV))
def test_any_bytes_as_csv(data: bytes) -> None:
    _loads_or_refuses("csv", ".csv", data)


@settings(max_examples=200, deadline=None)
@given(
    data=_any_bytes(
        [*_JSON_TOKENS, b'"inputs"', b'"dataset_id"'],
        b'[\n {"dataset_id": "d", "inputs": ["One.", "Two."]},\n {"id": "x", "inputs": ["Three."]}\n]',
    )
)
def test_any_bytes_as_help_harm(data: bytes) -> None:
    _loads_or_refuses("help-harm", ".json", data)


@settings(max_examples=200, deadline=None)
@given(
    data=_any_bytes(
        [*_JSON_TOKENS, b'"case_id"', b'"model"', b'"sample"'],
        b'{"case_id": "a", "model": "m", "text": "x"}\n{"case_id": "b", "model": "m", "sample": 1, "text": "y"}\n',
    )
)
def test_any_bytes_as_responses(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "replies.jsonl"
        path.write_bytes(data)
        try:
            got = read_responses(path)
        except InputError as err:
            assert err.path == str(path), str(err)
            assert err.line is not None or err.message == "no responses in file", str(err)
            return
        for response in got:
            response.model_dump_json().encode("utf-8")
