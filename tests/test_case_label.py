"""Which crisis label a case gets: `labels.case_label` and the four places that choose with it.

The verdict's PsyCrisis rule reads the gold label first; the rubric row a reply is judged under and the
category a report counts a case in read the run's triage first. Each place picks its triage label (which
judge, first repeat, scored only) and hands the choice to case_label.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mheval.engine.runner import _crisis_labels
from mheval.labels import CRISIS_TRIAGE, case_label
from mheval.records import Case, Judgment, Reason, Turn
from mheval.reporting.rundata import UNLABELLED, RunData, assign_categories
from mheval.reporting.verdict_block import crisis_labels
from mheval.runfolder.store import Store
from mheval.verdict import verdict_crisis_labels


@pytest.mark.parametrize(
    ("gold", "triage", "prefer", "expected"),
    [
        ("self-harm", "suicidal_ideation", "gold", "self-harm"),
        ("self-harm", "suicidal_ideation", "triage", "suicidal_ideation"),
        # one source missing: the other one, whichever is preferred
        (None, "anxiety_crisis", "gold", "anxiety_crisis"),
        (None, "anxiety_crisis", "triage", "anxiety_crisis"),
        ("no_crisis", None, "gold", "no_crisis"),
        ("no_crisis", None, "triage", "no_crisis"),
        # an empty label counts as missing
        ("", "violent_thoughts", "gold", "violent_thoughts"),
        ("substance_abuse_or_withdrawal", "", "triage", "substance_abuse_or_withdrawal"),
        # both missing
        (None, None, "gold", None),
        (None, None, "triage", None),
        ("", "", "triage", None),
    ],
)
def test_case_label_takes_the_preferred_source_and_falls_back(
    gold: str | None, triage: str | None, prefer: str, expected: str | None
) -> None:
    assert case_label(gold, triage, prefer=prefer) == expected  # type: ignore[arg-type]


def test_case_label_refuses_an_unknown_preference() -> None:
    with pytest.raises(ValueError, match="gold, triage"):
        case_label("self-harm", None, prefer="human")  # type: ignore[arg-type]


def _case(case_id: str, gold: str | None) -> Case:
    return Case(id=case_id, turns=[Turn(role="user", content="I have not slept in days and feel on edge.")],
                crisis_label=gold)  # fmt: skip


def _triage(case_id: str, label: str | None, judge: str = "judge-a", *, repeat: int = 0) -> Judgment:
    if label is None:  # unscored: the judge's endpoint failed
        return Judgment(case_id=case_id, protocol=CRISIS_TRIAGE, judge=judge, repeat=repeat, status="unscored",
                        reason=Reason.PROVIDER_ERROR)  # fmt: skip
    return Judgment(case_id=case_id, protocol=CRISIS_TRIAGE, judge=judge, repeat=repeat, label=label)


# Cases: gold and triage disagree; gold only; triage only; triage unscored with gold; nothing at all.
CASES = [
    _case("both", "self-harm"),
    _case("gold-only", "anxiety_crisis"),
    _case("triage-only", None),
    _case("unscored", "no_crisis"),
    _case("none", None),
]
TRIAGE = [
    _triage("both", "suicidal_ideation"),
    _triage("triage-only", "violent_thoughts"),
    _triage("unscored", None),
    # a later repeat and another judge are not the run's triage of the case
    _triage("none", "risk_taking_behaviours", repeat=1),
    _triage("gold-only", "no_crisis", judge="judge-b"),
]


def test_the_verdict_reads_gold_first() -> None:
    labels = verdict_crisis_labels(CASES, TRIAGE)
    assert labels == {
        "both": "self-harm",
        "gold-only": "anxiety_crisis",
        "triage-only": "violent_thoughts",
        "unscored": "no_crisis",
        "none": None,
    }


def _run(tmp_path: Path) -> RunData:
    data = RunData(run_dir=tmp_path, config={"judges": ["judge-a", "judge-b"]},
                   cases={c.id: c for c in CASES}, responses=[], judgments=list(TRIAGE))  # fmt: skip
    assign_categories(data)
    return data


def test_the_report_counts_a_case_under_its_triage_first(tmp_path: Path) -> None:
    data = _run(tmp_path)
    assert data.first_judge == "judge-a"
    assert data.category == {
        "both": "suicidal_ideation",
        "gold-only": "anxiety_crisis",
        "triage-only": "violent_thoughts",
        "unscored": "no_crisis",
        "none": UNLABELLED,
    }
    assert data.category_source == {
        "both": "triage",
        "gold-only": "gold",
        "triage-only": "triage",
        "unscored": "gold",
        "none": "none",
    }


def test_the_report_verdict_reads_gold_first_then_the_reports_triage(tmp_path: Path) -> None:
    assert crisis_labels(_run(tmp_path)) == verdict_crisis_labels(CASES, [j for j in TRIAGE if j.judge == "judge-a"])


def test_the_runner_judges_under_the_first_judges_triage_first(tmp_path: Path) -> None:
    with Store.open(tmp_path / "run") as store:
        store.put_judgments(TRIAGE)
        labels = _crisis_labels(store, ["judge-a", "judge-b"], {c.id: c for c in CASES})
    # a case with neither label is left out (the rubric then has no row for it)
    assert labels == {
        "both": "suicidal_ideation",
        "gold-only": "anxiety_crisis",
        "triage-only": "violent_thoughts",
        "unscored": "no_crisis",
    }
