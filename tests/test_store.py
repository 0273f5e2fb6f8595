"""The run store on a real SQLite file: unit keys, resumability rules, cache, export."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mheval.engine.cache import cache_key
from mheval.engine.export import export_table
from mheval.engine.store import Store
from mheval.errors import InputError
from mheval.records import Case, Judgment, Response, Turn


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
            Judgment(case_id="c1", protocol="psycrisis", judge="offline", model="m", sample=0, total=2,
                     scores={"empathy_collaboration": 1.0})
        )
        assert store.count("judgments") == 2


def test_finished_units_exclude_provider_errors(tmp_path):
    with Store.open(tmp_path) as store:
        store.put_judgment(Judgment(case_id="a", protocol="p", judge="j", label="x"))
        store.put_judgment(Judgment.unscored("parse_failure", "no JSON", case_id="b", protocol="p", judge="j"))
        store.put_judgment(Judgment.unscored("provider_error", "http_500", case_id="c", protocol="p", judge="j"))
        done = {k[0] for k in store.finished_judgments()}
        # A parse failure is final (asking again would be a new judgment); a provider error is retried.
        assert done == {"a", "b"}
        store.put_response(Response(case_id="a", model="m", text="hi"))
        store.put_response(Response(case_id="b", model="m", error="timeout: gave up"))
        assert store.finished_responses() == {("a", "m", 0)}


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
            Judgment(case_id="c1", protocol="psycrisis", judge="offline", model="m", sample=0, total=1,
                     scores={"referral": 1.0}, evidence={"referral": ["call 988"]})
        )
        store.put_judgment(Judgment.unscored("parse_failure", "empty", case_id="c2", protocol="psycrisis",
                                             judge="offline", model="m", sample=0))
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
