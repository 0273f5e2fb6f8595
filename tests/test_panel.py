"""Panels (majority/mean/median, ties, unscored members), self-consistency over repeats, model families."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from mheval.judges.panel import (
    aggregate_panel,
    build_panels,
    self_consistency,
    self_consistency_summary,
)
from mheval.models.families import model_families, same_family
from mheval.records import Judgment, Usage

MA_DIMS = ("guidance", "informativeness", "relevance", "safety", "empathy", "helpfulness", "understanding")


def label(
    judge: str, value: str | None, *, case: str = "c1", repeat: int = 0, reason: str = "parse_failure"
) -> Judgment:
    if value is None:
        return Judgment.unscored(reason, "x", case_id=case, protocol="crisis-triage", judge=judge, repeat=repeat)
    return Judgment(
        case_id=case,
        protocol="crisis-triage",
        judge=judge,
        label=value,
        repeat=repeat,
        usage=Usage(prompt_tokens=10, completion_tokens=2),
    )


def ma(judge: str, values: list[int], *, repeat: int = 0) -> Judgment:
    return Judgment(
        case_id="c1",
        protocol="mentalalign",
        judge=judge,
        model="m",
        sample=0,
        repeat=repeat,
        scores={d: float(v) for d, v in zip(MA_DIMS, values, strict=True)},
    )


def psy(judge: str, values: list[int], *, repeat: int = 0, case: str = "c1") -> Judgment:
    dims = ("empathy_collaboration", "emotion_regulation", "explore_concerns", "risk_assessment", "external_support")
    return Judgment(
        case_id=case,
        protocol="psycrisis",
        judge=judge,
        model="m",
        sample=0,
        repeat=repeat,
        scores={d: float(v) for d, v in zip(dims, values, strict=True)},
        total=float(sum(values)),
    )


def test_label_majority_and_cautious_tie() -> None:
    p = aggregate_panel([label("a", "no_crisis"), label("b", "anxiety_crisis"), label("c", "no_crisis")])
    assert p.judge == "panel:majority" and p.label == "no_crisis" and p.status == "ok"
    assert "panel_tie:label" not in p.flags and "panel_members:3" in p.flags and "panel_unscored:0" in p.flags
    assert p.usage.prompt_tokens == 30
    # 1-1 tie between a crisis and no_crisis: the protocol lists crises first, so the crisis wins.
    tie = aggregate_panel([label("a", "no_crisis"), label("b", "suicidal_ideation")])
    assert tie.label == "suicidal_ideation" and "panel_tie:label" in tie.flags
    tie2 = aggregate_panel([label("a", "self-harm"), label("b", "suicidal_ideation")])
    assert tie2.label == "suicidal_ideation"


def test_unscored_members_are_left_out_and_counted() -> None:
    p = aggregate_panel([label("a", "no_crisis"), label("b", None), label("c", "self-harm"), label("d", "self-harm")])
    assert p.label == "self-harm" and "panel_unscored:1" in p.flags and "panel_members:4" in p.flags
    assert "b (unscored: parse_failure)" in (p.rationale or "")
    none = aggregate_panel([label("a", None), label("b", None, reason="provider_error"), label("c", None)])
    assert none.status == "unscored" and none.label is None
    assert (none.reason_text or "").startswith("parse_failure: all 3 panel members unscored")


def test_score_methods_and_aggregates() -> None:
    members = [ma("a", [5, 4, 3, 2, 1, 1, 4]), ma("b", [4, 4, 3, 2, 2, 1, 5]), ma("c", [1, 2, 3, 4, 5, 1, 2])]
    maj = aggregate_panel(members, "majority")
    assert maj.scores["guidance"] == 1  # 5/4/1: three-way tie, the lowest wins
    assert "panel_tie:guidance" in maj.flags and maj.scores["informativeness"] == 4
    assert maj.scores["css"] == pytest.approx((1 + 4 + 3 + 2) / 4)
    mean = aggregate_panel(members, "mean")
    assert mean.judge == "panel:mean" and mean.scores["guidance"] == pytest.approx(10 / 3)
    assert mean.scores["ars"] == pytest.approx(np.mean([8 / 3, 1, 11 / 3]))
    med = aggregate_panel(members[:2], "median")
    assert med.scores["guidance"] == 4.5 and med.scores["understanding"] == 4.5  # even count: mean of middle two
    psy_panel = aggregate_panel([psy("a", [1, 0, 1, 0, 1]), psy("b", [1, 1, 0, 0, 1])], "majority")
    assert psy_panel.scores == {
        "empathy_collaboration": 1,
        "emotion_regulation": 0,
        "explore_concerns": 0,
        "risk_assessment": 0,
        "external_support": 1,
    }  # binary ties count as not met
    assert psy_panel.total == 2


def test_panel_refuses_what_it_cannot_mean() -> None:
    with pytest.raises(ValueError, match="needs scores"):
        aggregate_panel([label("a", "no_crisis"), label("b", "no_crisis")], "mean")
    with pytest.raises(ValueError, match="one unit"):
        aggregate_panel([label("a", "no_crisis"), label("b", "no_crisis", case="c2")])
    with pytest.raises(ValueError, match="unknown panel method"):
        aggregate_panel([label("a", "no_crisis")], "vote")
    with pytest.raises(ValueError, match="at least one"):
        aggregate_panel([])


def test_build_panels_per_unit_and_repeat() -> None:
    judgments = [
        label("a", "no_crisis", repeat=0),
        label("b", "self-harm", repeat=0),
        label("a", "self-harm", repeat=1),
        label("b", "self-harm", repeat=1),
        label("a", "no_crisis", case="solo"),
        ma("a", [3] * 7),
        ma("b", [5] * 7),
    ]
    panels = build_panels(judgments, ["majority", "mean"])
    keys = sorted((p.case_id, p.protocol, p.judge, p.repeat) for p in panels)
    assert keys == [
        ("c1", "crisis-triage", "panel:majority", 0),
        ("c1", "crisis-triage", "panel:majority", 1),
        ("c1", "mentalalign", "panel:majority", 0),
        ("c1", "mentalalign", "panel:mean", 0),
    ]
    assert build_panels([*judgments, *panels], ["majority"], judges=["a"]) == []  # one judge is no panel


def test_self_consistency_per_item() -> None:
    reps = [
        psy("j", [1, 0, 1, 0, 1], repeat=0),
        psy("j", [1, 1, 1, 0, 1], repeat=1),
        psy("j", [1, 0, 1, 0, 0], repeat=2),
    ]
    labels = [label("j", "no_crisis", repeat=0), label("j", "no_crisis", repeat=1), label("j", None, repeat=2)]
    frame = self_consistency(reps + labels)
    row = frame[(frame.protocol == "psycrisis") & (frame.dimension == "emotion_regulation")].iloc[0]
    assert row.n_repeats == 3 and row.n_scored == 3 and row.modal == 0 and row.agree == pytest.approx(2 / 3)
    assert row["std"] == pytest.approx(np.std([0, 1, 0], ddof=1))
    total = frame[frame.dimension == "total"].iloc[0]
    assert total["mean"] == pytest.approx(3.0) and total["min"] == 2 and total["max"] == 4
    lab = frame[frame.dimension == "label"].iloc[0]
    assert lab.n_repeats == 3 and lab.n_unscored == 1 and lab.n_scored == 2 and lab.agree == 1.0
    assert math.isnan(lab["std"])


def test_self_consistency_summary_fleiss_matches_statsmodels() -> None:
    rng = np.random.default_rng(0)
    cats = ["no_crisis", "self-harm", "suicidal_ideation"]
    table = rng.integers(0, 3, size=(20, 3))
    table[:10, 1] = table[:10, 0]  # some agreement
    judgments = [label("j", cats[table[i, r]], case=f"c{i}", repeat=r) for i in range(20) for r in range(3)]
    summary = self_consistency_summary(judgments)
    row = summary[summary.dimension == "label"].iloc[0]
    expected = fleiss_kappa(aggregate_raters(table)[0])
    assert row.units == 20 and row.fleiss_kappa == pytest.approx(expected)
    assert row.all_agree == pytest.approx(np.mean([len(set(r)) == 1 for r in table]))


@pytest.mark.parametrize(
    ("judge", "model", "same"),
    [
        ("openai/gpt-4o", "openai/gpt-4o-mini", True),
        ("openai/gpt-4.1", "openrouter/openai/o3-mini", True),
        ("o4-mini", "mentalalign/gpt4omini", True),
        ("gpt-4o", "mentalalign/gpt4o", True),
        ("anthropic/claude-3-7-sonnet", "openrouter/anthropic/claude-3.5-haiku@https://openrouter.ai/api/v1", True),
        ("claude", "mentalalign/claude", True),
        ("google/gemini-2.5-pro", "ollama/gemma2:9b", True),
        ("vllm/Qwen2.5-72B-Instruct@http://127.0.0.1:8000/v1", "mentalalign/qwen_3", True),
        ("deepseek/deepseek-chat", "mentalalign/ds_qwen", True),  # R1-distilled Qwen: both families
        ("ollama/qwen2.5:14b", "mentalalign/ds_qwen", True),
        ("together/meta-llama/Llama-3.3-70B-Instruct-Turbo", "ollama/llama3.1", True),
        ("groq/mixtral-8x7b", "mistral/mistral-large", True),
        ("vllm/judge@http://127.0.0.1:9/v1", "vllm/judge@http://127.0.0.1:9/v1", True),  # the same model
        ("openai/gpt-4o", "anthropic/claude-3-haiku", False),
        ("claude", "mentalalign/gpt4o", False),
        ("gpt-4o", "mentalalign/original", False),
        ("offline", "local/smollm2", False),
        ("vllm/judge@http://127.0.0.1:9/v1", "vllm/target@http://127.0.0.1:9/v1", False),  # unknown families
        ("ollama/llama3.1", "llamacpp/phi-3-mini", False),  # a provider named llamacpp is not Llama
    ],
)
def test_same_family(judge: str, model: str, same: bool) -> None:
    assert same_family(judge, model) is same


def test_model_families() -> None:
    assert model_families("mentalalign/ds_llama") == {"deepseek", "meta"}
    assert model_families("local/smollm2") == {"huggingface"}
    assert model_families("vllm/judge@http://x") == frozenset()


def test_self_consistency_summary_icc_for_scores_matches_pingouin() -> None:
    import pandas as pd
    import pingouin as pg

    rng = np.random.default_rng(1)
    truth = rng.integers(1, 6, 15)
    scores = np.clip(truth[:, None] + rng.integers(-1, 2, size=(15, 2)), 1, 5)
    judgments = [
        ma("j", [int(scores[i, r])] * 7, repeat=r).model_copy(update={"case_id": f"c{i}"})
        for i in range(15)
        for r in range(2)
    ]
    row = self_consistency_summary(judgments).set_index("dimension").loc["safety"]
    long = pd.DataFrame([(i, r, float(scores[i, r])) for i in range(15) for r in range(2)], columns=["u", "r", "s"])
    ref = pg.intraclass_corr(long, targets="u", raters="r", ratings="s").set_index("Type").loc["ICC(A,1)", "ICC"]
    assert row["icc_a1"] == pytest.approx(ref) and math.isnan(row["fleiss_kappa"])
    assert row["all_agree"] == pytest.approx(np.mean(scores[:, 0] == scores[:, 1]))
