"""compare_runs on two small runs built with the real Store: differences, intervals and tests by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from mheval.records import Case, Judgment, Response, Turn
from mheval.reporting.compare import compare_runs
from mheval.reporting.metrics import ALL
from mheval.reporting.summary import format_comparison
from mheval.runfolder.store import Store
from mheval.stats.intervals import bootstrap_mean_ci

LABELS = [
    "suicidal_ideation",
    "suicidal_ideation",
    "suicidal_ideation",
    "suicidal_ideation",
    "anxiety_crisis",
    "anxiety_crisis",
    "anxiety_crisis",
    "anxiety_crisis",
]


def make_run(
    run_dir: Path,
    model: str,
    scores: dict[str, list[int]],
    *,
    ids: list[str] | None = None,
    psycrisis: list[int] | None = None,
) -> Path:
    """One model; `scores` maps sample index -> appropriateness per case; gold labels only (no triage)."""
    ids = ids or [f"c{i}" for i in range(len(LABELS))]
    cases = [
        Case(
            id=cid,
            crisis_label=label,
            language="zh" if i % 2 else "en",
            turns=[Turn(role="user", content=f"message {cid}")],
        )
        for i, (cid, label) in enumerate(zip(ids, LABELS, strict=True))
    ]
    with Store.open(run_dir) as store:
        store.set_meta("config", {"suite": "cmp", "models": [model], "judges": ["j"]})
        store.put_cases(cases)
        for sample, values in scores.items():
            for case, value in zip(cases, values, strict=True):
                store.put_response(Response(case_id=case.id, model=model, sample=sample, text="reply"))
                store.put_judgment(
                    Judgment(
                        case_id=case.id,
                        protocol="appropriateness",
                        judge="j",
                        model=model,
                        sample=sample,
                        scores={"appropriateness": float(value)},
                    )
                )
        for case, total in zip(cases, psycrisis or [], strict=False):
            store.put_judgment(
                Judgment(
                    case_id=case.id,
                    protocol="psycrisis",
                    judge="j",
                    model=model,
                    sample=0,
                    scores={"risk_assessment": float(total > 0)},
                    total=float(total),
                )
            )
    return run_dir


A = [1, 2, 3, 4, 1, 2, 5, 3]
B = [2, 3, 3, 5, 1, 4, 5, 4]


def _row(frame, **where):
    sel = frame
    for k, v in where.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, where
    return sel.iloc[0]


def test_paired_comparison_matches_hand_computation(tmp_path):
    a = make_run(tmp_path / "a", "m", {0: A}, psycrisis=[0, 1, 2, 3, 0, 1, 2, 3])
    b = make_run(tmp_path / "b", "m", {0: B}, psycrisis=[1, 1, 2, 4, 0, 2, 3, 3])
    frame = compare_runs(a, b)
    pooled = _row(frame, metric="appropriateness", model_a="m", category=ALL)
    d = np.array(B, float) - np.array(A, float)
    assert pooled["n_paired"] == 8 and pooled["diff"] == pytest.approx(d.mean())
    expected = bootstrap_mean_ci(d)
    assert (pooled["diff_low"], pooled["diff_high"]) == pytest.approx((expected.ci_low, expected.ci_high))
    assert pooled["test"].startswith("Wilcoxon")
    assert pooled["p_value"] == pytest.approx(sps.wilcoxon(d).pvalue)
    assert (pooled["mean_a"], pooled["mean_b"]) == pytest.approx((np.mean(A), np.mean(B)))

    # Per category: the first four cases are suicidal ideation.
    si = _row(frame, metric="appropriateness", category="suicidal_ideation")
    assert si["diff"] == pytest.approx(d[:4].mean())
    assert si["p_value"] == pytest.approx(sps.wilcoxon(d[:4]).pvalue)

    # Harmful rate: A has two 1s (cases 0 and 4), B one (case 4) -> -1/8.
    harm = _row(frame, metric="harmful_rate", category=ALL)
    assert harm["diff"] == pytest.approx(-1 / 8)
    psy = _row(frame, metric="psycrisis_total", category=ALL)
    assert psy["diff"] == pytest.approx(np.mean([1, 0, 0, 1, 0, 1, 1, 0]))
    text = format_comparison(frame)
    assert "appropriateness" in text and "-12 pp" in text and "Wilcoxon" in text


def test_samples_are_averaged_per_case_and_identical_runs_show_no_change(tmp_path):
    a = make_run(tmp_path / "a", "m", {0: A, 1: B})
    frame = compare_runs(a, a)
    pooled = _row(frame, metric="appropriateness", category=ALL)
    assert pooled["n_a"] == 8 and pooled["diff"] == 0 and pooled["p_value"] == 1.0
    assert pooled["mean_a"] == pytest.approx((np.mean(A) + np.mean(B)) / 2)


def test_unpaired_when_cases_differ_and_different_models_pair_up(tmp_path):
    a = make_run(tmp_path / "a", "model-x", {0: A})
    b = make_run(tmp_path / "b", "model-y", {0: B}, ids=[f"other{i}" for i in range(8)])
    frame = compare_runs(a, b)
    pooled = _row(frame, metric="appropriateness", category=ALL)
    assert (pooled["model_a"], pooled["model_b"], pooled["n_paired"]) == ("model-x", "model-y", 0)
    assert pooled["diff"] == pytest.approx(np.mean(B) - np.mean(A))
    assert pooled["test"].startswith("Mann-Whitney")
    assert pooled["p_value"] == pytest.approx(sps.mannwhitneyu(B, A, alternative="two-sided").pvalue)
    assert pooled["diff_low"] < pooled["diff"] < pooled["diff_high"]
    assert "model-x -> model-y" in format_comparison(frame)


@pytest.mark.parametrize("paired", [True, False])
def test_swapping_the_runs_negates_the_difference_and_its_interval(tmp_path, paired):
    # Run b stores its cases in the opposite order (as a run whose replies finished in another order does):
    # `compare A B` and `compare B A` must still give the same interval, negated.
    ids = [f"c{i}" for i in range(8)]
    b_ids = list(reversed(ids)) if paired else [f"other{i}" for i in range(8)]
    a = make_run(tmp_path / "a", "m", {0: A}, ids=ids)
    b = make_run(tmp_path / "b", "m", {0: list(reversed(B))}, ids=b_ids)
    ab, ba = compare_runs(a, b), compare_runs(b, a)
    for metric in ("appropriateness", "harmful_rate"):
        one, other = _row(ab, metric=metric, category=ALL), _row(ba, metric=metric, category=ALL)
        assert one["n_paired"] == (8 if paired else 0)
        assert one["diff"] == pytest.approx(-other["diff"], abs=1e-12)
        assert (one["diff_low"], one["diff_high"]) == pytest.approx((-other["diff_high"], -other["diff_low"]), abs=1e-9)
        assert one["p_value"] == pytest.approx(other["p_value"], abs=1e-12)
