"""The built-in `crisis-core` suite keeps its documented composition (labels, languages, turns, signals, locales)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from mheval.records import CRISIS_LABELS, Case
from mheval.suites import load_suite

REQUIRED_LOCALES = {"US", "GB", "CN", "ES", "IN", "AU", "CA", "NZ", "IE", "SG", "HK", "TW", "DE", "ZA", "PH"}
CJK = re.compile("[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    suite = load_suite("crisis-core")
    assert suite.name == "crisis-core"
    assert suite.description
    assert suite.responses == []
    return suite.cases


def test_size_and_languages(cases: list[Case]) -> None:
    assert 140 <= len(cases) <= 200
    langs = Counter(c.language for c in cases)
    assert langs["zh"] >= 45
    assert langs["en"] + langs["zh"] == len(cases)


def test_every_label_has_at_least_14_cases(cases: list[Case]) -> None:
    counts = Counter(c.crisis_label for c in cases)
    assert set(counts) == set(CRISIS_LABELS)
    for label in CRISIS_LABELS:
        assert counts[label] >= 14, label


def test_every_label_in_both_languages(cases: list[Case]) -> None:
    pairs = Counter((c.crisis_label, c.language) for c in cases)
    for label in CRISIS_LABELS:
        assert pairs[(label, "en")] >= 5 and pairs[(label, "zh")] >= 5, label


def test_ids_unique_and_well_formed(cases: list[Case]) -> None:
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    for case in cases:
        assert re.fullmatch(rf"cc-{case.language}-\d{{3}}", case.id), case.id


def test_each_case_is_complete(cases: list[Case]) -> None:
    for case in cases:
        Case.model_validate(case.model_dump())  # round-trips through the schema
        assert case.turns[-1].role == "user" and case.turns[-1].content.strip(), case.id
        assert case.source == "crisis-core"
        assert case.crisis_label in CRISIS_LABELS
        assert case.locale and re.fullmatch(r"[A-Z]{2}", case.locale), case.id
        md = case.metadata
        assert md["signal"] in {"direct", "indirect", "knowledge_seeking", "none"}, case.id
        assert md["turns_kind"] == ("multi" if len(case.turns) > 1 else "single"), case.id
        assert isinstance(md["notes"], str) and 10 <= len(md["notes"]) <= 200, case.id


def test_language_matches_text(cases: list[Case]) -> None:
    for case in cases:
        has_cjk = bool(CJK.search(case.transcript()))
        assert has_cjk == (case.language == "zh"), case.id


def test_multi_turn_conversations(cases: list[Case]) -> None:
    multi = [c for c in cases if len(c.turns) > 1]
    assert len(multi) >= 24
    for case in multi:
        assert 3 <= len(case.turns) <= 7, case.id
        roles = [t.role for t in case.turns]
        assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"], case.id
    # multi-turn cases are spread over labels, not all in one
    assert len({c.crisis_label for c in multi}) == len(CRISIS_LABELS)


def test_indirect_and_knowledge_seeking_signals(cases: list[Case]) -> None:
    subtle = [c for c in cases if c.metadata["signal"] in {"indirect", "knowledge_seeking"}]
    assert len(subtle) >= 24
    assert all(c.crisis_label != "no_crisis" for c in subtle)
    assert {c.language for c in subtle} == {"en", "zh"}
    # a crisis case always carries a risk signal; a no_crisis case never does
    for case in cases:
        if case.crisis_label == "no_crisis":
            assert case.metadata["signal"] == "none", case.id
        else:
            assert case.metadata["signal"] != "none", case.id


def test_hard_negatives(cases: list[Case]) -> None:
    hard = [c for c in cases if c.metadata.get("hard_negative")]
    assert len(hard) >= 10
    assert all(c.crisis_label == "no_crisis" for c in hard)
    assert {c.language for c in hard} == {"en", "zh"}
    # hard negatives share vocabulary with crisis cases, so keywords alone cannot separate them
    text = " ".join(c.transcript().lower() for c in hard)
    for word in ("overdose", "kill", "grief", "服药过量", "死"):
        assert word in text, word


def test_locales(cases: list[Case]) -> None:
    locales = {c.locale for c in cases}
    assert locales >= REQUIRED_LOCALES
    zh_locales = Counter(c.locale for c in cases if c.language == "zh")
    assert set(zh_locales) <= {"CN", "TW", "HK", "SG"}
    assert zh_locales["CN"] >= len([c for c in cases if c.language == "zh"]) / 2


def test_no_method_details(cases: list[Case]) -> None:
    """Risk is conveyed by feelings and intent, never by quantities or instructions."""
    dose = re.compile(r"\b\d+\s*(mg|g|ml|milligrams?|pills|tablets)\b|\d+\s*(毫克|片|粒)", re.I)
    for case in cases:
        assert not dose.search(case.transcript()), case.id


def test_limit_keeps_first_cases() -> None:
    suite = load_suite("crisis-core", limit=5)
    assert [c.id for c in suite.cases] == [f"cc-en-00{i}" for i in range(1, 6)]
