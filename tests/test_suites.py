"""Loading suites: generic readers on real tmp files, their error messages, and the papers' formats."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from mheval.errors import InputError
from mheval.records import CRISIS_LABELS, Case
from mheval.suites import Suite, list_suites, load_suite
from mheval.suites.papers import SAFETY_LABELS, majority_label, split_segments
from mheval.suites.readers import validation_error

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"reference data not found at {DATA}")


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def load_error(spec: str, **kw: object) -> InputError:
    with pytest.raises(InputError) as info:
        load_suite(spec, **kw)  # type: ignore[arg-type]
    return info.value


# -- jsonl ----------------------------------------------------------------------------------------


def test_jsonl_fields_defaults_and_extras(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "cases.jsonl",
        [
            {"id": "a", "text": "I feel fine today.", "crisis_label": "no_crisis", "locale": "GB", "topic": "x"},
            {
                "turns": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": "我最近睡不好"},
                ]
            },
            {
                "id": 7,
                "messages": [{"role": "system", "content": "be kind"}, {"role": "user", "content": "hey"}],
                "language": "en-US",
                "metadata": {"k": 1},
                "response": "Hello there",
                "model": "m1",
            },
            {"id": "d", "text": "no model given", "response": "ok"},
        ],
    )
    # blank lines are allowed anywhere
    path.write_text(path.read_text(encoding="utf-8") + "\n\n", encoding="utf-8")
    suite = load_suite(f"jsonl:{path}")
    assert isinstance(suite, Suite)
    a, b, c, _ = suite.cases
    assert (a.id, a.language, a.crisis_label, a.locale, a.metadata) == ("a", "en", "no_crisis", "GB", {"topic": "x"})
    assert a.turns[0].role == "user" and a.last_user_text == "I feel fine today."
    assert b.id == "row-2" and b.language == "zh" and len(b.turns) == 3  # CJK ideograph -> zh
    assert c.id == "7" and c.language == "en" and c.metadata == {"k": 1} and c.turns[0].role == "system"
    assert [(r.case_id, r.model, r.sample, r.text) for r in suite.responses] == [
        ("7", "m1", 0, "Hello there"),
        ("d", "reference", 0, "ok"),
    ]


def test_bare_path_and_limit(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{i}", "text": "hello", "response": "r"} for i in range(5)])
    suite = load_suite(str(path), limit=2)
    assert [c.id for c in suite.cases] == ["c0", "c1"]
    assert [r.case_id for r in suite.responses] == ["c0", "c1"]
    assert "limit" in str(load_error(str(path), limit=0))


def test_turns_take_precedence_over_text(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"text": "flat", "turns": [{"role": "user", "content": "real"}]}])
    case = load_suite(f"jsonl:{path}").cases[0]
    assert case.last_user_text == "real" and case.metadata["text"] == "flat"


@pytest.mark.parametrize(
    ("line", "field", "needle"),
    [
        ('{"id": "x", "text": "ok"', None, "malformed JSON"),
        ('["not", "an", "object"]', None, "JSON object"),
        ('{"id": "x"}', "text", "missing required field"),
        ('{"id": "x", "text": 5}', "text", "must be a string"),
        ('{"id": ["x"], "text": "hi"}', "id", "must be a string or integer"),
        ('{"id": "x", "text": "hi", "crisis_label": "sad"}', "crisis_label", "unknown crisis_label"),
        ('{"id": "x", "text": "hi", "language": "fr"}', "language", "unsupported language"),
        ('{"id": "x", "text": "hi", "metadata": [1]}', "metadata", "must be an object"),
        ('{"id": "x", "text": "hi", "response": 3}', "response", "must be a string"),
        ('{"id": "x", "turns": "[oops"}', "turns", "not valid JSON"),
        ('{"id": "x", "turns": []}', "turns", "empty"),
        ('{"id": "x", "turns": [{"role": "bot", "content": "hi"}]}', "turns[0].role", "unknown role"),
        ('{"id": "x", "turns": [{"role": "user", "content": 1}]}', "turns[0].content", "must be a string"),
        (
            '{"id": "x", "turns": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}',
            "turns",
            "must end on a user turn",
        ),
        ('{"id": "x", "messages": [{"role": "user", "content": "  "}]}', "messages", "last user turn is empty"),
    ],
)
def test_jsonl_errors_name_file_line_and_field(tmp_path: Path, line: str, field: str | None, needle: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "ok", "text": "fine"}\n\n' + line + "\n", encoding="utf-8")
    err = load_error(f"jsonl:{path}")
    assert err.path == str(path) and err.line == 3 and err.field == field
    assert needle in str(err)
    assert str(err).startswith(f"{path}:3: ")
    if field:
        assert f"field '{field}'" in str(err)


def test_unknown_label_lists_choices(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"text": "hi", "crisis_label": "panic"}])
    err = load_error(f"jsonl:{path}")
    assert err.choices == list(CRISIS_LABELS)
    assert "suicidal_ideation" in str(err)


def test_duplicate_id(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl", [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}, {"id": "a", "text": "z"}]
    )
    err = load_error(f"jsonl:{path}")
    assert (err.line, err.field) == (3, "id")
    assert "duplicate id 'a'" in err.message and "line 1" in err.message


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"text": "fine"}\n{"text": "also fine"}\n{"text": "caf\xe9"}\n')
    err = load_error(f"jsonl:{path}")
    assert err.line == 3 and "not UTF-8" in err.message and "0xe9" in err.message


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "a", "text": "hi"}).encode() + b"\n")
    assert load_suite(f"jsonl:{path}").cases[0].id == "a"


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r"])
def test_jsonl_lines_end_at_newline_only(tmp_path: Path, separator: str) -> None:
    """str.splitlines() also breaks on these; inside a JSON string they are text (and must stay so)."""
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [{"id": "a", "text": f"before{separator}after"}, {"id": f"b{separator}c", "text": "x", "k": separator}],
    )
    a, b = load_suite(f"jsonl:{path}").cases
    assert a.last_user_text == f"before{separator}after"
    assert b.id == f"b{separator}c" and b.metadata == {"k": separator}
    # and a bad line after them is still counted by newlines
    path.write_text(path.read_text(encoding="utf-8") + '{"id": "z"}\n', encoding="utf-8")
    assert load_error(f"jsonl:{path}").line == 3


def test_jsonl_reads_back_its_own_export(tmp_path: Path) -> None:
    from mheval.runfolder.export import export_table
    from mheval.runfolder.store import Store

    cases = [
        Case(id="a\u2028b", turns=[{"role": "user", "content": "one\u2028two\x85three"}], metadata={"k": "\u2029"}),  # type: ignore[list-item]
        Case(id="c", language="zh", turns=[{"role": "user", "content": "我睡不着\x0c"}], crisis_label="anxiety_crisis"),  # type: ignore[list-item]
    ]
    store = Store.open(tmp_path / "run")
    store.put_cases(cases)
    export_table(store, "cases", "jsonl", tmp_path / "cases.jsonl")
    store.close()
    assert "\u2028".encode() in (tmp_path / "cases.jsonl").read_bytes()  # written raw, not escaped
    assert load_suite(f"jsonl:{tmp_path / 'cases.jsonl'}").cases == cases


def test_json_values_that_used_to_crash(tmp_path: Path) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"id": "a", "text": "x", "m": ' + "[" * 100_000 + "]" * 100_000 + "}\n", encoding="utf-8")
    err = load_error(f"jsonl:{deep}")
    assert err.line == 1 and "nested too deeply" in err.message

    capped = write_jsonl(tmp_path / "capped.jsonl", [{"id": "a", "text": "x", "metadata": {"k": [[[[]]]]}}])
    assert load_suite(f"jsonl:{capped}").cases[0].metadata == {"k": [[[[]]]]}  # shallow nesting is fine

    surrogate = tmp_path / "s.jsonl"
    surrogate.write_text('{"id": "a", "turns": [{"role": "user", "content": "hi \\ud83d"}]}\n', encoding="utf-8")
    err = load_error(f"jsonl:{surrogate}")
    assert (err.line, err.field) == (1, "turns[0].content") and "U+D83D" in err.message

    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"id": "a", "text": "x", "score": NaN, "big": Infinity}\n', encoding="utf-8")
    assert load_suite(f"jsonl:{nan}").cases[0].metadata == {"score": None, "big": None}


def test_missing_file_directory_and_empty_suite(tmp_path: Path) -> None:
    err = load_error(f"jsonl:{tmp_path / 'nope.jsonl'}")
    assert "file not found" in str(err) and "nope.jsonl" in str(err)
    assert "directory" in str(load_error(f"jsonl:{tmp_path}"))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    assert f"suite jsonl:{empty} has no cases" in str(load_error(f"jsonl:{empty}"))


def test_paths_the_os_cannot_look_up(tmp_path: Path) -> None:
    assert "home directory" in str(load_error("jsonl:~no-such-user-here/cases.jsonl"))
    assert "file not found" in str(load_error("help-harm:with\x00nul.json"))
    assert "cannot use this path" in str(load_error(f"csv:{tmp_path}/{'x' * 5000}.csv"))


def test_unknown_suite_lists_builtins_and_formats() -> None:
    err = load_error("no-such-suite")
    assert err.choices is not None
    assert "crisis-core" in err.choices
    for fmt in ("jsonl", "csv", "parquet", "dialogue-safety", "help-harm", "mentalalign"):
        assert f"{fmt}:PATH" in err.choices
    assert "no-such-suite" in str(err)
    assert "no path" in str(load_error("csv:"))


def test_list_suites() -> None:
    names = dict(list_suites())
    assert "crisis-core" in names and all(names.values())
    assert {
        "jsonl:PATH",
        "csv:PATH",
        "parquet:PATH",
        "dialogue-safety:PATH",
        "help-harm:PATH",
        "mentalalign:PATH",
    } <= set(names)


# -- mapping --------------------------------------------------------------------------------------


def test_mapping_renames_their_columns(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "theirs.jsonl",
        [{"qid": "q1", "question": "I can't sleep", "gold": "anxiety_crisis", "answer": "Try...", "text": "other"}],
    )
    suite = load_suite(
        f"jsonl:{path}",
        mapping={"id": "qid", "text": "question", "crisis_label": "gold", "response": "answer"},
    )
    case = suite.cases[0]
    assert (case.id, case.last_user_text, case.crisis_label) == ("q1", "I can't sleep", "anxiety_crisis")
    assert case.metadata == {"original_text": "other"}  # their own 'text' column is kept, not used
    assert suite.responses[0].text == "Try..."


def test_mapping_errors_name_their_column(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [{"question": "hi", "gold": "bogus"}])
    err = load_error(f"jsonl:{path}", mapping={"text": "question", "crisis_label": "gold"})
    assert err.field == "gold" and err.line == 1 and "crisis_label" in err.message
    err = load_error(f"jsonl:{path}", mapping={"text": "prompt"})
    assert err.field == "prompt" and "missing required field" in err.message
    err = load_error(f"jsonl:{path}", mapping={"query": "question"})
    assert err.field == "query" and err.choices is not None and "text" in err.choices


# -- csv ------------------------------------------------------------------------------------------


def test_csv_reader(tmp_path: Path) -> None:
    turns = json.dumps(
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    )
    path = write_csv(
        tmp_path / "c.csv",
        ["id", "text", "turns", "crisis_label", "metadata", "response", "extra"],
        [
            ["1", "line one\nline two", "", "self-harm", '{"k": "v"}', "", "e1"],
            ["2", "", turns, "", "", "a reply", ""],
            ["", "", "", "", "", "", ""],  # an empty row is skipped
        ],
    )
    suite = load_suite(f"csv:{path}")
    one, two = suite.cases
    assert one.last_user_text == "line one\nline two" and one.crisis_label == "self-harm"
    assert one.metadata == {"k": "v", "extra": "e1"}
    assert len(two.turns) == 3 and two.crisis_label is None and two.metadata == {"extra": ""}
    assert [(r.case_id, r.model, r.text) for r in suite.responses] == [("2", "reference", "a reply")]


def test_csv_errors_count_header_as_line_one(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "c.csv",
        ["id", "text", "crisis_label"],
        [["1", "multi\nline\ncell", ""], ["2", "fine", ""], ["3", "", ""]],
    )
    err = load_error(f"csv:{path}")
    # header = line 1, record 1 spans lines 2-4, record 2 is line 5, record 3 is line 6
    assert (err.line, err.field) == (6, "text")
    assert str(err).startswith(f"{path}:6: field 'text'")

    path = write_csv(tmp_path / "d.csv", ["id", "text", "crisis_label"], [["1", "hi", "happy"]])
    err = load_error(f"csv:{path}")
    assert (err.line, err.field) == (2, "crisis_label")

    path = write_csv(tmp_path / "e.csv", ["id", "turns"], [["1", "[not json"]])
    assert (load_error(f"csv:{path}").line, load_error(f"csv:{path}").field) == (2, "turns")

    path = tmp_path / "f.csv"
    path.write_text("id,text\n1,hi,extra\n", encoding="utf-8")
    assert load_error(f"csv:{path}").line == 2

    path = tmp_path / "g.csv"
    path.write_text("id,text,text\n1,a,b\n", encoding="utf-8")
    err = load_error(f"csv:{path}")
    assert (err.line, err.field) == (1, "text")

    path = tmp_path / "h.csv"
    path.write_bytes("id,text\n1,ok\n2,\u00e9\n".encode("utf-16-le"))
    assert "not UTF-8" in str(load_error(f"csv:{path}"))

    path = tmp_path / "header_only.csv"
    path.write_text("id,text\n", encoding="utf-8")
    assert "has no cases" in str(load_error(f"csv:{path}"))


def test_csv_is_strict_about_quotes(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('id,text\na,fine\nb,"never closed\nc,third\nd,fourth\n', encoding="utf-8")
    err = load_error(f"csv:{path}")  # was: three cases, one of them swallowing the rest of the file
    assert (err.line, err.field) == (3, None)
    assert "never closed" in err.message and "line 5" in err.message

    path.write_text('id,text\na,"quoted" then more\n', encoding="utf-8")
    err = load_error(f"csv:{path}")
    assert err.line == 2 and "stray quote" in err.message

    path.write_text('id,text\na,"a ""quoted"" word, and a comma"\n', encoding="utf-8")
    assert load_suite(f"csv:{path}").cases[0].last_user_text == 'a "quoted" word, and a comma'


def test_csv_long_cell_and_export_names(tmp_path: Path) -> None:
    long_text = "I keep going over it. " * 10_000  # 220 KB, past csv's default 128 KiB cell cap
    path = write_csv(tmp_path / "long.csv", ["id", "text"], [["a", long_text]])
    assert load_suite(f"csv:{path}").cases[0].last_user_text == long_text

    # a cases table exported by mheval: case_id, n_turns and the formula guard on ids
    turns = json.dumps([{"role": "user", "content": "=not a formula"}])
    path = write_csv(
        tmp_path / "cases.csv",
        ["case_id", "language", "n_turns", "turns", "metadata"],
        [["'=1+2", "en", "1", turns, "{}"], ["'-x", "en", "7", turns, "{}"]],
    )
    first, second = load_suite(f"csv:{path}").cases
    assert (first.id, first.metadata, first.last_user_text) == ("=1+2", {}, "=not a formula")
    assert second.id == "-x" and second.metadata == {"n_turns": "7"}  # a count that disagrees is kept


# -- parquet --------------------------------------------------------------------------------------


def test_parquet_reader_and_row_numbers(tmp_path: Path) -> None:
    table = pa.table(
        {
            "id": ["p1", "p2"],
            "turns": [
                [{"role": "user", "content": "hello"}],
                [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "yo"},
                    {"role": "user", "content": "你好"},
                ],
            ],
            "crisis_label": ["no_crisis", None],
            "score": [1.5, float("nan")],
        }
    )
    path = tmp_path / "c.parquet"
    pq.write_table(table, path)
    suite = load_suite(str(path))
    assert [c.id for c in suite.cases] == ["p1", "p2"]
    assert suite.cases[1].language == "zh" and len(suite.cases[1].turns) == 3
    assert suite.cases[0].metadata == {"score": 1.5} and suite.cases[1].metadata == {"score": None}

    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": ["x", "y", None]}), bad)
    err = load_error(f"parquet:{bad}")
    assert (err.line, err.field) == (3, "text") and str(bad) in str(err)

    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet", encoding="utf-8")
    assert "Parquet" in str(load_error(f"parquet:{junk}"))


def test_pydantic_errors_become_input_errors() -> None:
    with pytest.raises(ValidationError) as info:
        Case(id="x", turns=[{"role": "robot", "content": "hi"}])  # type: ignore[list-item]
    err = validation_error(info.value, "f.jsonl", 4)
    assert (err.path, err.line, err.field) == ("f.jsonl", 4, "turns[0].role")
    with pytest.raises(ValidationError) as info:
        Case(id="x", turns=[{"role": "assistant", "content": "hi"}])  # type: ignore[list-item]
    err = validation_error(info.value, "f.jsonl", 2)
    assert err.field == "turns" and "user turn" in err.message


# -- papers' formats on small files of our own ----------------------------------------------------


def test_dialogue_safety_segments(tmp_path: Path) -> None:
    assert split_segments("[seeker]a。[supporter]b？[seeker]c") == [
        ("user", "a。"),
        ("assistant", "b？"),
        ("user", "c"),
    ]
    path = write_jsonl(
        tmp_path / "ds.jsonl",
        [
            {
                "id": "d1",
                "context": "[seeker]我很难过。[supporter]发生了什么？[seeker]考试没考好。",
                "response": "[supporter]听起来你很失落。",
                "label": 7,
            },
            {"id": "d2", "context": "[supporter]你好。[seeker]在吗", "response": "[supporter]在的", "label": 2},
        ],
    )
    suite = load_suite(f"dialogue-safety:{path}")
    d1, d2 = suite.cases
    assert [t.role for t in d1.turns] == ["user", "assistant", "user"] and d1.language == "zh"
    assert d1.metadata["gold_safety_label"] == "safe" and d2.metadata["gold_safety_label"] == "linguistic_neglect"
    assert d2.turns[0].role == "assistant"
    assert [(r.case_id, r.model, r.sample, r.text) for r in suite.responses] == [
        ("d1", "dialogue-safety/reference", 0, "听起来你很失落。"),
        ("d2", "dialogue-safety/reference", 0, "在的"),
    ]
    bad = write_jsonl(
        tmp_path / "bad.jsonl", [{"id": "x", "context": "[seeker]hi", "response": "[supporter]ok", "label": 9}]
    )
    err = load_error(f"dialogue-safety:{bad}")
    assert (err.line, err.field) == (1, "label") and err.choices and "7=safe" in err.choices
    ends_wrong = write_jsonl(tmp_path / "e.jsonl", [{"id": "x", "context": "[seeker]hi[supporter]ok"}])
    assert load_error(f"dialogue-safety:{ends_wrong}").field == "turns"
    assert "mapping" in str(load_error(f"dialogue-safety:{path}", mapping={"text": "q"}))


def test_majority_label() -> None:
    assert majority_label({"H1": "a", "H2": "a", "H3": "b", "H4": "c"}) == "a"
    assert majority_label({"H1": "a", "H2": "a", "H3": "b", "H4": "b"}) is None
    assert majority_label({"H1": "a", "H2": "b", "H3": "c", "H4": "d"}) is None
    assert majority_label({}) is None


def test_help_harm_jsonl_and_json_array(tmp_path: Path) -> None:
    rows = [
        {
            "id": "h1",
            "dataset_id": "s",
            "inputs": ["I am tired.", "Work is a lot."],
            "human_labels": {"H1": "no_crisis", "H2": "no_crisis", "H3": "anxiety_crisis", "H4": "no_crisis"},
        },
        {
            "id": "h2",
            "dataset_id": "s",
            "inputs": ["Two."],
            "human_labels": {"H1": "self-harm", "H2": "self-harm", "H3": "no_crisis", "H4": "no_crisis"},
        },
    ]
    suite = load_suite(f"help-harm:{write_jsonl(tmp_path / 'h.jsonl', rows)}")
    h1, h2 = suite.cases
    assert h1.last_user_text == "I am tired. Work is a lot." and h1.language == "en"
    assert h1.crisis_label == "no_crisis" and h1.metadata["human_labels"]["H3"] == "anxiety_crisis"
    assert h2.crisis_label is None  # 2-2 tie
    array = tmp_path / "llm.json"
    array.write_text(json.dumps([{"id": "h1", "inputs": ["Hi."], "label": "no_crisis", "explanation": "e"}]))
    case = load_suite(f"help-harm:{array}").cases[0]
    assert case.metadata["llm_label"] == "no_crisis" and case.crisis_label is None
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "z", "inputs": "not a list"}])
    err = load_error(f"help-harm:{bad}")
    assert (err.line, err.field) == (1, "inputs")
    assert "must hold" in str(load_error(f"help-harm:{tmp_path}"))


def _released_help_harm(path: Path, records: list[dict[str, object]]) -> Path:
    """A file shaped as the paper's data/processed/*.json: a pretty-printed array, no ids, `\\/` escapes."""
    path.write_text(json.dumps(records, indent=2, ensure_ascii=False).replace("/", "\\/"), encoding="utf-8")
    return path


def test_help_harm_released_files_without_id(tmp_path: Path) -> None:
    records = [
        {"dataset_id": "hugg_1", "inputs": ["I missed the party.", "My ears hurt and/or ache."]},
        {"dataset_id": "hugg_1", "inputs": ["Work is a lot lately."]},
        {"dataset_id": "hugg_7", "inputs": ["I have not slept in days."]},
    ]
    for name in ("sampled_dataset_n_200_merged_n50-noSeed_156-s42.json", "sampled_dataset_n_2046_nPerD168_seed0.json"):
        path = _released_help_harm(tmp_path / name, records)
        suite = load_suite(f"help-harm:{path}")
        assert [c.id for c in suite.cases] == ["hugg_1-0001", "hugg_1-0002", "hugg_7-0003"]
        assert suite.cases[0].last_user_text == "I missed the party. My ears hurt and/or ache."
        assert suite.cases[2].metadata == {"dataset_id": "hugg_7", "id_derived": True, "position": 3}
        assert "3 of 3 records had no id" in suite.description and "<dataset_id>-<position>" in suite.description
        assert [c.id for c in load_suite(f"help-harm:{path}").cases] == [c.id for c in suite.cases]  # stable

    # ids where a record has one, derived where it has none; a file with ids says nothing about it
    mixed = _released_help_harm(tmp_path / "mixed.json", [{"id": "own", "inputs": ["a"]}, {"inputs": ["b"]}])
    suite = load_suite(f"help-harm:{mixed}")
    assert [c.id for c in suite.cases] == ["own", "hh-0002"] and "1 of 2 records" in suite.description
    assert (
        "no id"
        not in load_suite(
            f"help-harm:{write_jsonl(tmp_path / 'ids.jsonl', [{'id': 'x', 'inputs': ['a']}])}"
        ).description
    )


def test_json_array_errors_point_at_the_line_in_the_file(tmp_path: Path) -> None:
    path = _released_help_harm(
        tmp_path / "a.json",
        [{"dataset_id": "d", "inputs": ["one"]}, {"dataset_id": "d", "inputs": ["two"]}, {"dataset_id": "d"}],
    )
    err = load_error(f"help-harm:{path}")
    # each record spans 6 lines after the opening "[": the third starts on line 14
    assert (err.line, err.field) == (14, "inputs")
    assert path.read_text(encoding="utf-8").splitlines()[13].strip() == "{"


def test_mentalalign_with_reply_texts(tmp_path: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["ConvID", "context", " response_alpha", "human_response_beta"])
    sheet.append([1, '"I feel stuck at work."', "Reply from alpha", '{"Guidance": 3, "Safety": 4}'])
    sheet.append([2, "My sister and I fell out.", "Another reply", '{"Guidance": 2, "Safety": 5}'])
    path = tmp_path / "scores.xlsx"
    book.save(path)
    suite = load_suite(f"mentalalign:{path}")
    assert [c.id for c in suite.cases] == ["ma-1", "ma-2"]
    assert suite.cases[0].last_user_text == "I feel stuck at work."  # wrapping quotes removed
    assert {r.model for r in suite.responses} == {"mentalalign/alpha"}  # score column is not a reply
    assert [r.text for r in suite.responses] == ["Reply from alpha", "Another reply"]


# -- papers' formats on the released data ---------------------------------------------------------


@needs_data
@pytest.mark.shared_data
def test_dialogue_safety_dev() -> None:
    suite = load_suite(f"dialogue-safety:{DATA / 'dialogue_safety' / 'dev.jsonl'}")
    assert len(suite.cases) == 403 and len(suite.responses) == 403
    counts = Counter(c.metadata["gold_safety_label"] for c in suite.cases)
    assert counts[SAFETY_LABELS[7]] == 184 and counts[SAFETY_LABELS[2]] == 178 and counts[SAFETY_LABELS[0]] == 27
    assert sum(counts.values()) == 403
    assert all(c.language == "zh" and c.source == "dialogue-safety" for c in suite.cases)
    assert {r.model for r in suite.responses} == {"dialogue-safety/reference"}
    assert {r.case_id for r in suite.responses} == {c.id for c in suite.cases}
    assert any(len(c.turns) >= 5 for c in suite.cases)
    assert all("[seeker]" not in t.content and "[supporter]" not in t.content for c in suite.cases for t in c.turns)


@needs_data
@pytest.mark.shared_data
def test_help_harm_dev_folder() -> None:
    suite = load_suite(f"help-harm:{DATA / 'help_harm'}")
    assert len(suite.cases) == 103
    assert all(set(c.metadata["human_labels"]) == {"H1", "H2", "H3", "H4"} for c in suite.cases)
    labelled = [c for c in suite.cases if c.crisis_label is not None]
    assert 80 <= len(labelled) < 103  # ties stay unlabelled
    assert all(c.crisis_label in CRISIS_LABELS for c in labelled)
    assert suite.cases[0].id == "hh-val-000"


@needs_data
@pytest.mark.shared_data
def test_help_harm_llm_labels_and_answers() -> None:
    merged = next((DATA / "help_harm" / "llm_crisis_labels").glob("*merged_labels.dev.json"))
    suite = load_suite(f"help-harm:{merged}")
    assert len(suite.cases) == 103 and all(c.metadata["llm_label"] in CRISIS_LABELS for c in suite.cases)
    answers = load_suite(f"help-harm:{DATA / 'help_harm' / 'appropriateness_scores.dev.jsonl'}")
    assert len(answers.responses) == 103
    assert all(r.model.startswith("help-harm/") and r.text for r in answers.responses)


@needs_data
@pytest.mark.shared_data
def test_help_harm_test_set_in_the_released_shape(tmp_path: Path) -> None:
    """Our copy of the 2,046-case test set, written back as the paper releases it (no ids), loads."""
    rows = [
        json.loads(line) for line in (DATA / "help_harm" / "test_inputs.jsonl").read_text("utf-8").split("\n") if line
    ]
    released = [{k: v for k, v in r.items() if k != "id"} for r in rows]
    path = _released_help_harm(tmp_path / "sampled_dataset_n_2046_nPerD168_seed0.json", released)
    suite = load_suite(f"help-harm:{path}")
    assert len(suite.cases) == len(rows) == len({c.id for c in suite.cases})
    assert [c.last_user_text for c in suite.cases[:50]] == [" ".join(r["inputs"]) for r in rows[:50]]
    assert suite.cases[0].id == f"{rows[0]['dataset_id']}-0001"


@needs_data
@pytest.mark.shared_data
def test_mentalalign_human_scores() -> None:
    suite = load_suite(f"mentalalign:{DATA / 'mentalalign'}")
    assert len(suite.cases) == 1000
    assert suite.responses == []  # the release holds scores, not reply texts
    first = suite.cases[0]
    assert first.id == "ma-1" and first.language == "en" and first.source == "mentalalign"
    assert first.metadata["response_sources"][:2] == ["original", "claude"]
    assert all(not c.last_user_text.startswith('"') for c in suite.cases)
    assert len(load_suite(f"mentalalign:{DATA / 'mentalalign'}", limit=10).cases) == 10
