"""The run store on a real SQLite file: unit keys, resumability rules, cache, export."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from mheval.engine.cache import cache_key
from mheval.errors import InputError
from mheval.records import Case, Judgment, Response, Turn
from mheval.runfolder.export import export_table
from mheval.runfolder.store import Store


def _case(i: int) -> Case:
    return Case(id=f"c{i}", turns=[Turn(role="user", content=f"message {i}")], crisis_label="no_crisis")


def test_one_row_per_unit_and_replace(tmp_path):
    with Store.open(tmp_path) as store:
        store.put_cases([_case(1), _case(2)])
        store.put_cases([_case(1)])  # upsert, no duplicate
        assert store.count("cases") == 2
        j = Judgment(case_id="c1", protocol="crisis-triage", judge="offline", label="no_crisis")
        store.put_judgment(j)
        store.put_judgment(j.model_copy(update={"label": "anxiety_crisis"}))
        assert store.count("judgments") == 1
        assert store.judgments()[0].label == "anxiety_crisis"
        # Case-level and response-level judgments of the same case are different units.
        store.put_judgment(
            Judgment(
                case_id="c1",
                protocol="psycrisis",
                judge="offline",
                model="m",
                sample=0,
                total=2,
                scores={"empathy_collaboration": 1.0},
            )
        )
        assert store.count("judgments") == 2


def test_finished_units_exclude_provider_errors(tmp_path):
    with Store.open(tmp_path) as store:
        store.put_judgment(Judgment(case_id="a", protocol="p", judge="j", label="x"))
        store.put_judgment(Judgment.unscored("parse_failure", "no JSON", case_id="b", protocol="p", judge="j"))
        store.put_judgment(Judgment.unscored("provider_error", "http_500", case_id="c", protocol="p", judge="j"))
        done = {k[0] for k in store.judgment_inputs(finished=True)}
        # A parse failure is final (asking again would be a new judgment); a provider error is retried.
        assert done == {"a", "b"}
        store.put_response(Response(case_id="a", model="m", text="hi"))
        store.put_response(Response(case_id="b", model="m", error="timeout: gave up"))
        assert set(store.response_inputs(finished=True)) == {("a", "m", 0)}


def test_store_survives_reopen_and_cache_roundtrip(tmp_path):
    key = cache_key("http://x/v1", "m", [{"role": "user", "content": "hi"}], {"seed": 1})
    assert key != cache_key("http://x/v1", "m", [{"role": "user", "content": "hi"}], {"seed": 2})
    with Store.open(tmp_path) as store:
        store.cache_put(key, {"text": "hello"})
    with Store.open_existing(tmp_path) as store:
        assert store.cache_get(key) == {"text": "hello"}


def test_open_existing_refuses_non_run_folder(tmp_path):
    with pytest.raises(InputError, match="not a run folder"):
        Store.open_existing(tmp_path)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_export_judgments_columns(tmp_path, fmt, capsys):
    with Store.open(tmp_path / "run") as store:
        store.put_judgment(
            Judgment(
                case_id="c1",
                protocol="psycrisis",
                judge="offline",
                model="m",
                sample=0,
                total=1,
                scores={"referral": 1.0},
                evidence={"referral": ["call 988"]},
            )
        )
        store.put_judgment(
            Judgment.unscored(
                "parse_failure", "empty", case_id="c2", protocol="psycrisis", judge="offline", model="m", sample=0
            )
        )
        target = tmp_path / f"out.{fmt}"
        export_table(store, "judgments", fmt, target)
    if fmt == "jsonl":
        rows = [json.loads(line) for line in target.read_text().splitlines()]
    elif fmt == "csv":
        rows = pd.read_csv(target).to_dict("records")
    else:
        rows = pd.read_parquet(target).to_dict("records")
    assert len(rows) == 2
    for col in ("case_id", "model", "sample", "protocol", "judge", "repeat", "label", "scores", "status", "reason"):
        assert col in rows[0]
    assert rows[1]["status"] == "unscored" and rows[1]["reason"].startswith("parse_failure")
    assert not list(tmp_path.glob("*.tmp"))


def test_export_unknown_format_and_table(tmp_path):
    with Store.open(tmp_path) as store:
        with pytest.raises(InputError, match="choose from: jsonl, csv, parquet"):
            export_table(store, "judgments", "xml")
        with pytest.raises(InputError, match="choose from: cases, responses, judgments"):
            export_table(store, "nope", "jsonl")


def _j(case: str, repeat: int = 0, status: str = "ok") -> Judgment:
    if status == "ok":
        return Judgment(case_id=case, protocol="psycrisis", judge="j", model="m", sample=0, repeat=repeat, total=3)
    return Judgment.unscored(
        "provider_error", "x", case_id=case, protocol="psycrisis", judge="j", model="m", sample=0, repeat=repeat
    )


def _rows(path, table: str) -> int:
    with sqlite3.connect(path) as con:  # a second connection sees only what was committed
        return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_deferred_puts_wait_then_land_in_one_flush(tmp_path):
    store = Store.open(tmp_path)
    with store.deferred(max_pending=1000):
        for i in range(10):
            store.put_judgment(_j(f"c{i}"))
        store.put_response(Response(case_id="c0", model="m", text="hi"))
        store.cache_put("k", {"text": "t"})
        assert _rows(store.path, "judgments") == 0 and store.pending == 12
        assert store.cache_get("k") == {"text": "t"}  # read-your-writes before the flush
        assert len(store.judgment_inputs(finished=True)) == 10  # a read flushes first
        assert _rows(store.path, "judgments") == 10 and store.pending == 0
        store.put_judgment(_j("c0", status="unscored"))  # a later write of the same unit wins
    assert _rows(store.path, "judgments") == 10
    assert [j.status for j in store.judgments() if j.case_id == "c0"] == ["unscored"]
    store.close()


def test_max_pending_and_close_flush(tmp_path):
    store = Store.open(tmp_path)
    with store.deferred(max_pending=4):
        for i in range(3):
            store.put_judgment(_j(f"c{i}"))
        assert _rows(store.path, "judgments") == 0
        store.put_judgment(_j("c3"))
        assert _rows(store.path, "judgments") == 4
        store.put_judgment(_j("c4"))
        store.close()  # closing inside the block still writes what waits
    assert _rows(tmp_path / Store.FILENAME, "judgments") == 5


def test_immediate_mode_is_unchanged(tmp_path):
    with Store.open(tmp_path) as store:
        store.put_judgment(_j("c0"))
        assert _rows(store.path, "judgments") == 1 and store.pending == 0
