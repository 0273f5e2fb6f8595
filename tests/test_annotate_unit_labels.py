"""The rubric row a rated reply is shown under, and which flow answers become labels.

A unit's crisis label is the case's label by `labels.case_label` with the run's triage first (the row the
reply was judged under); where triage is unscored the gold label holds. A flow answer of "not relevant"
(the flow's own NOT_RELEVANT, from conversation-flow.yaml) is no label for `agree`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from annotate_helpers import build_run
from mheval.annotate.answers import Answer, labels_frame
from mheval.annotate.study import run_units
from mheval.conversations.flow import NOT_RELEVANT, SCORES
from mheval.labels import APPROPRIATENESS, CONVERSATION_FLOW, CRISIS_TRIAGE, NO_CRISIS, case_label
from mheval.records import Judgment, Reason
from mheval.runfolder.store import Store


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("unit-labels") / "run")


def test_a_units_label_is_the_triage_first_where_it_was_scored_else_the_gold(built: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(built, run_dir)
    with Store.open_existing(run_dir) as store:
        gold = {c.id: c.crisis_label for c in store.cases()}
        judge = next(j.judge for j in store.iter_judgments(CRISIS_TRIAGE))
        ids = {"protocol": CRISIS_TRIAGE, "judge": judge}
        # e3's gold is no crisis: its triage now says otherwise. e1's triage failed: its gold holds.
        store.put_judgment(Judgment(case_id="e3", label="anxiety_crisis", **ids))
        store.put_judgment(Judgment.unscored(Reason.PARSE_FAILURE, "no label", case_id="e1", **ids))
        triage = {j.case_id: j.label for j in store.iter_judgments(CRISIS_TRIAGE) if j.status == "ok"}
    assert gold["e3"] == NO_CRISIS and "e1" not in triage

    units = run_units(run_dir, APPROPRIATENESS)
    by_case = {u.key[0]: u.crisis_label for u in units}
    assert by_case["e3"] == "anxiety_crisis"
    assert by_case["e1"] == gold["e1"]
    assert len(units) == 2 * len(gold)  # one per reply: two models
    for unit in units:
        case = unit.key[0]
        assert unit.crisis_label == case_label(gold[case], triage.get(case), prefer="triage")


def _answer(question: str, value: str) -> Answer:
    return Answer(question=question, value=value, unsure=False, comment=None, seconds=4.0)


def test_a_flow_question_answered_not_relevant_is_no_label() -> None:
    applies = next(a for a in SCORES)
    rated = [
        ("rater-a", ("scenario-1", "model-x", 0), "en", None,
         {"detect": _answer("detect", applies), "proportionate": _answer("proportionate", NOT_RELEVANT)}),
    ]  # fmt: skip
    frame = labels_frame(CONVERSATION_FLOW, rated)
    assert list(frame["dimension"]) == ["detect"]
    assert frame["value"].tolist() == [pytest.approx(SCORES[applies])]
