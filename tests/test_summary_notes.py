"""`RunSummary.table_notes`: the definitions `mheval summary` prints under its table, made by the API. A run whose
judges quoted evidence the judged text does not hold (tests/test_report.py's run) gets the ungrounded-claims
definition; a run without quoted evidence (tests/test_gate.py's) gets none."""

from __future__ import annotations

from pathlib import Path

from cli_inprocess import mheval as cli
from mheval import api
from test_gate import _store
from test_report import build_run

DEFINED = "ungrounded_claims: positive claims whose quoted evidence is not in the text judged"


def test_a_run_with_ungrounded_claims_defines_the_column(tmp_path: Path) -> None:
    run = build_run(tmp_path / "r")
    summary = api.summary(run)
    assert summary.table["ungrounded_claims"].astype(bool).any()
    (note,) = summary.table_notes
    assert note.startswith(DEFINED)
    shown = cli("summary", str(run))
    assert shown.exit_code == 0 and note in shown.stderr.replace("\n", " ")


def test_a_run_without_quoted_evidence_needs_no_definition(tmp_path: Path) -> None:
    run = _store(tmp_path / "r", {"c1": 4.0, "c2": 2.0})
    assert api.summary(run).table_notes == []
    shown = cli("summary", str(run))
    assert shown.exit_code == 0 and "ungrounded_claims:" not in shown.stderr
