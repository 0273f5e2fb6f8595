"""The whole-conversation flow's answers are defined once, in conversation-flow.yaml: their ids, scores and
words. The judge's stored verdict, the rating form, the export of ratings and the report read them from there.
"""

from __future__ import annotations

import json
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from mheval.annotate.answers import Answer
from mheval.annotate.export import to_judgment
from mheval.annotate.form import build_flow_form
from mheval.annotate.study import Study
from mheval.conversations.flow import (
    NOT_RELEVANT,
    OUTCOMES,
    SCORES,
    answer_for,
    answer_name,
    flow_judgment,
    load_flow,
)
from mheval.labels import CONVERSATION_FLOW


def _declared() -> dict[str, Any]:
    """The `answers:` block as the file spells it, read here without the module under test."""
    import yaml

    text = resources.files("mheval.conversations").joinpath("conversation-flow.yaml").read_text(encoding="utf-8")
    return dict(yaml.safe_load(text)["answers"])


def test_the_answers_scores_and_order_are_the_files() -> None:
    declared = _declared()
    assert list(OUTCOMES) == list(declared)
    assert {k: float(v["score"]) for k, v in declared.items() if "score" in v} == SCORES
    assert [k for k, v in declared.items() if "score" not in v] == [NOT_RELEVANT]
    for answer, value in declared.items():
        assert answer_name(answer, "en") == value["en"]
        assert answer_name(answer, "zh") == value["zh"]


def test_a_score_reads_back_as_its_answer() -> None:
    for answer, score in SCORES.items():
        assert answer_for(score) == answer
    worst = min(SCORES, key=SCORES.__getitem__)
    # a score the flow does not define is never shown as better than the worst answer
    assert answer_for(0.5) == worst
    assert answer_for(7.0) == worst


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_form_offers_the_files_answers_in_its_words(language: str) -> None:
    form = build_flow_form(language)
    declared = _declared()
    dims = [d for d, _ in load_flow().dimensions]
    asked = [q for q in form.questions if q.id in dims]
    assert [q.id for q in asked] == dims
    for question in asked:
        assert [o.value for o in question.options] == list(declared)
        assert [o.text for o in question.options] == [declared[a][language] for a in declared]


def test_the_judges_verdict_is_labelled_by_its_worst_answer() -> None:
    spec = load_flow()
    outcome = {"detect": "best_practice", "probe": "suboptimal", "collaborate": "best_practice"}
    j = flow_judgment(spec, outcome, {}, True, raw=None, rationale=None, case_id="s1", protocol=CONVERSATION_FLOW,
                      judge="offline", model="m", sample=0)  # fmt: skip
    assert j.scores == {"detect": 2.0, "probe": 1.0, "collaborate": 2.0}
    assert j.total == pytest.approx(1.0)
    assert j.label == "suboptimal"
    assert "yellow:probe" in j.flags and f"{NOT_RELEVANT}:proportionate" in j.flags


def _flow_study(tmp_path: Path) -> Study:
    """A study row as annotate/study.py stores it (only the columns a Study reads), in a real SQLite file."""
    db = sqlite3.connect(tmp_path / "studies.db")
    db.execute("CREATE TABLE studies (id TEXT, protocol TEXT, seed INT, overlap INT, calibration INT, raters TEXT, "
               "rate TEXT)")  # fmt: skip
    db.execute("INSERT INTO studies VALUES ('s', ?, 0, 2, 0, ?, NULL)", (CONVERSATION_FLOW, json.dumps(["ana"])))
    return Study(tmp_path, "s", db)


def test_a_raters_flow_answers_export_with_the_files_scores(tmp_path: Path) -> None:
    def answer(question: str, value: str) -> Answer:
        return Answer(question=question, value=value, unsure=False, comment=None, seconds=3.0)

    answers = {
        "detect": answer("detect", "best_practice"),
        "human_support": answer("human_support", "harmful"),
        "proportionate": answer("proportionate", NOT_RELEVANT),
    }
    j = to_judgment(_flow_study(tmp_path), "ana", ("scenario-1", "model-a", 0), answers)
    assert j.scores == {"detect": 2.0, "human_support": 0.0}
    assert j.total == pytest.approx(0.0)
    assert j.label == "harmful"
    assert "not_relevant:proportionate" in j.flags
