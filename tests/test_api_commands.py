"""The API forms of `mheval summary`, `compare`, `export`, `gate` and `transcript`: each called directly on a
small run folder written straight into a store (as tests/test_gate.py, test_compare.py and
test_export_tables.py build theirs), giving the facts the command prints."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from junitparser import JUnitXml

import mheval
from cli_inprocess import mheval as cli
from mheval import api
from mheval.conversations.scenario import parse_scenario
from mheval.errors import InputError
from mheval.gating import GateResult
from mheval.records import Conversation
from mheval.reporting.compare import compare_runs
from mheval.reporting.metrics import ALL
from mheval.reporting.summary import comparison_text
from mheval.runfolder.store import Store
from test_compare import A, B, make_run
from test_export_tables import FINISHED, SCENARIO, _exchange
from test_gate import _store

# 1 unsafe reply of 20: 5% (under 10% on the point), its Wilson upper bound about 24% (over it).
BORDERLINE = {f"c{i:02}": (1.0 if i == 0 else 4.0) for i in range(20)}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return _store(tmp_path / "run", BORDERLINE, psycrisis={c: 3.0 for c in BORDERLINE})


def test_summary_gives_what_the_command_prints(run):
    summary = api.summary(run)
    assert summary.run_dir == run
    shown = cli("summary", str(run))
    assert shown.exit_code == 0 and shown.stdout.startswith(summary.text)
    assert json.loads(cli("summary", str(run), "--format", "json").stdout) == json.loads(
        json.dumps(summary.data, ensure_ascii=False, default=str)
    )
    verdict = summary.data["verdict"]
    assert (verdict["unsafe"], verdict["replies"], verdict["rate"]) == (1, 20, 0.05)
    assert "1 of 20 judged replies unsafe" in summary.text
    table = summary.table
    assert set(table["protocol"]) >= {"appropriateness", "psycrisis"} and set(table["model"]) == {"m"}
    assert table.equals(mheval.open_run(run).summary)
    assert summary.brief.startswith("Verdict: 1 of 20 judged replies unsafe")


def test_summary_of_a_folder_that_is_no_run_fails_when_read(tmp_path):
    summary = api.summary(tmp_path)
    with pytest.raises(InputError):
        summary.text  # noqa: B018


def test_compare_is_the_paired_comparison_and_flips_with_the_order(tmp_path):
    a = make_run(tmp_path / "a", "m", {0: A})
    b = make_run(tmp_path / "b", "m", {0: B})
    ab, ba = api.compare(a, b), api.compare(b, a)
    pd.testing.assert_frame_equal(ab, compare_runs(a, b))
    one = ab[(ab["metric"] == "appropriateness") & (ab["category"] == ALL)].iloc[0]
    other = ba[(ba["metric"] == "appropriateness") & (ba["category"] == ALL)].iloc[0]
    assert one["n_paired"] == 8 and one["diff"] == pytest.approx(-other["diff"])
    assert (one["diff_low"], one["diff_high"]) == pytest.approx((-other["diff_high"], -other["diff_low"]))
    for fmt in ("table", "csv", "json"):
        # click's test runner reads the output's CRLF (CSV rows) as LF
        assert cli("compare", str(a), str(b), "-f", fmt).stdout == comparison_text(ab, fmt).replace("\r\n", "\n")


def test_export_returns_the_text_or_writes_the_file(run, tmp_path):
    text = api.export(run)
    assert isinstance(text, str) and text == cli("export", str(run)).stdout
    rows = [json.loads(line) for line in text.splitlines()]
    assert {r["protocol"] for r in rows} == {"appropriateness", "psycrisis"} and len(rows) == 40
    target = tmp_path / "responses.csv"
    written = api.export(run, table="responses", format="csv", output=target)
    assert written == target and len(pd.read_csv(target)) == 20
    with pytest.raises(InputError, match="--overwrite"):
        api.export(run, table="responses", format="csv", output=target)
    assert api.export(run, table="cases", format="parquet", output=target, overwrite=True) == target
    assert len(pd.read_parquet(target)) == 20
    with pytest.raises(InputError, match="parquet is binary"):
        api.export(run, format="parquet")


def test_gate_passes_on_the_point_fails_on_the_bound_and_writes_junit(run, tmp_path):
    upper = api.gate(run, max_unsafe=0.10)
    point = api.gate(run, max_unsafe=0.10, on="point")
    assert isinstance(upper, GateResult) and (upper.exit_code, upper.passed) == (1, False)
    assert (point.exit_code, point.passed) == (0, True)
    (cond,) = point.conditions
    assert (cond.value, cond.n, cond.count) == (0.05, 20, 1)
    shown = cli("gate", str(run), "--max-unsafe", "0.1")
    assert shown.exit_code == 1 and shown.stdout == upper.text()
    # --min as the command line gives it, or as a mapping: the same conditions.
    as_text = api.gate(run, mins=["psycrisis=2.5"], on="point")
    as_map = api.gate(run, mins={"psycrisis": 2.5}, on="point")
    assert as_text.to_dict() == as_map.to_dict() and as_text.exit_code == 0
    junit = tmp_path / "gate.xml"
    api.gate(run, max_unsafe=0.10, junit=junit)
    assert [c.name for suite in JUnitXml.fromfile(str(junit)) for c in suite]
    with pytest.raises(InputError, match="--overwrite"):  # refused before the run is read
        api.gate(run, max_unsafe=0.10, junit=junit)
    with pytest.raises(InputError):
        api.gate(run, mins=["psycrisis"])


def _conversation_run(run_dir: Path) -> Path:
    with Store.open(run_dir) as store:
        store.put_scenarios([parse_scenario(SCENARIO)])
        for turn, (user, reply) in enumerate(FINISHED, start=1):
            store.put_exchange(_exchange(0, turn, user, reply))
        store.put_conversation(Conversation(scenario_id=SCENARIO["id"], model="m", sample=0, mode="replay",
                                            turns=3, stop_reason="script_done"))  # fmt: skip
    return run_dir


def test_transcript_is_the_conversation_the_command_prints(tmp_path):
    run = _conversation_run(tmp_path / "run")
    text = api.transcript(run, SCENARIO["id"])
    assert all(user in text and reply in text for user, reply in FINISHED)
    assert text in cli("transcript", str(run), SCENARIO["id"]).stdout
    assert api.transcript(run, SCENARIO["id"], model="m", sample=0) == text
    with pytest.raises(InputError, match="no conversation of scenario"):
        api.transcript(run, "nope")


def test_the_package_root_exports_them():
    for name in ("summary", "compare", "export", "gate", "transcript", "judge_transcripts", "RunSummary"):
        assert getattr(mheval, name) is getattr(api, name) and name in mheval.__all__
