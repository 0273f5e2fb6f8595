"""Human-label loading, reliability verdicts and the agreement report (synthetic and help_harm data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from mheval.analysis.agree import agreement_report
from mheval.analysis.labels import load_human_labels
from mheval.errors import InputError
from mheval.stats import Estimate, assess, cohen_kappa, human_range, leniency, width_verdict

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "help_harm").is_dir(), reason="../shared/data is absent")


def _est(value: float | None, lo: float | None = None, hi: float | None = None) -> Estimate:
    return Estimate(value, lo, hi, 10, "test")


# --------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    ("lo", "hi", "verdict"),
    [(0.5, 0.855, "Good"), (0.5, 0.856, "Moderate"), (0.2, 0.76, "Moderate"), (0.2, 0.761, "Poor")],
)
def test_width_verdict_thresholds(lo: float, hi: float, verdict: str) -> None:
    assert width_verdict(_est(0.6, lo, hi)) == verdict


def test_width_verdict_without_interval() -> None:
    assert width_verdict(_est(0.6)) is None
    assert width_verdict(_est(None)) is None


def test_leniency_direction() -> None:
    assert leniency(_est(0.4, 0.1, 0.7)) == "inflates"
    assert leniency(_est(-0.4, -0.7, -0.1)) == "deflates"
    assert leniency(_est(0.4, -0.1, 0.9)) == "no clear bias"
    assert leniency(_est(0.4)) is None


def test_human_range_positions() -> None:
    humans = [_est(0.46), _est(0.59), _est(0.52)]
    below = human_range(_est(0.30, 0.20, 0.50), humans)
    assert (below.position, below.ci_overlap, below.within_human_range) == ("below", True, False)
    far_below = human_range(_est(0.30, 0.20, 0.40), humans)
    assert far_below.ci_overlap is False
    assert human_range(_est(0.50, 0.4, 0.6), humans).position == "within"
    above = human_range(_est(0.645, 0.55, 0.72), humans)
    assert (above.position, above.within_human_range) == ("above", True)
    assert (above.low, above.high, above.n_pairs) == (0.46, 0.59, 3)
    assert human_range(_est(0.5), [_est(None)]).position is None


def test_assess_combines_everything() -> None:
    a = assess("j", "safety", "icc_a1", _est(0.5, 0.3, 0.6), bias=_est(0.3, 0.1, 0.5), human=[_est(0.4)])
    assert (a.verdict, a.leniency, a.human.position) == ("Good", "inflates", "above")
    assert json.dumps(a.to_dict())


# --------------------------------------------------------------------------- loading human labels


def test_load_long_csv(tmp_path: Path) -> None:
    p = tmp_path / "long.csv"
    p.write_text("id,rater,value\nc1,A,3\nc1,B,4\nc2,A,NA\nc2,B,5\n")
    df = load_human_labels(p)
    assert list(df.columns) == ["id", "rater", "value"]
    assert df["value"].dtype == float
    assert np.isnan(df.loc[2, "value"]) and df.loc[3, "value"] == 5.0


def test_load_wide_csv_skips_text_columns(tmp_path: Path) -> None:
    p = tmp_path / "wide.csv"
    p.write_text("id,text,H1,H2\nc1,hello,no_crisis,anxiety_crisis\nc2,bye,self-harm,\n")
    df = load_human_labels(p)
    assert sorted(df["rater"].unique()) == ["H1", "H2"]
    assert df["value"].tolist()[:3] == ["no_crisis", "anxiety_crisis", "self-harm"]
    assert pd.isna(df["value"].iloc[3])
    picked = load_human_labels(p, raters=["H2"])
    assert picked["rater"].unique().tolist() == ["H2"]


def test_load_jsonl_dict_field_with_nan_and_dimensions(tmp_path: Path) -> None:
    p = tmp_path / "scores.jsonl"
    p.write_text(
        '{"id": "a", "human_scores": {"H1": 5.0, "H2": NaN}}\n\n{"id": "b", "human_scores": {"H1": 2, "H2": 3}}\n'
    )
    df = load_human_labels(p)
    assert len(df) == 4 and df["value"].isna().sum() == 1
    nested = tmp_path / "dims.jsonl"
    nested.write_text('{"id": "a", "ratings": {"H1": {"safety": 4, "empathy": 5}, "H2": {"safety": 3}}}\n')
    df2 = load_human_labels(nested)
    assert list(df2.columns) == ["id", "rater", "value", "dimension"]
    assert set(df2["dimension"]) == {"safety", "empathy"}


def test_load_json_array_and_long_jsonl(tmp_path: Path) -> None:
    arr = tmp_path / "labels.json"
    arr.write_text(json.dumps([{"id": "a", "labels": {"r1": "x", "r2": "y"}}]))
    assert len(load_human_labels(arr)) == 2
    long = tmp_path / "long.jsonl"
    long.write_text('{"id": "a", "rater": "r1", "value": "x"}\n{"id": "a", "rater": "r2", "value": null}\n')
    assert load_human_labels(long)["value"].isna().sum() == 1


@pytest.mark.parametrize(
    ("name", "text", "line", "field", "message"),
    [
        ("bad.jsonl", '{"id": "a", "human_labels": {"H1": "x"}}\n{"id": \n', 2, None, "invalid JSON"),
        ("noid.jsonl", '{"human_labels": {"H1": "x"}}\n', 1, "id", "missing item id"),
        ("nodict.jsonl", '{"id": "a", "human_labels": ["x"]}\n', 1, "human_labels", "expected a dict"),
        ("dup.csv", "id,rater,value\na,H1,1\na,H1,2\n", 3, "value", "duplicate"),
        ("noidcol.csv", "case,H1\na,1\n", 1, "id", "no id column"),
        ("ragged.csv", "id,H1\na,1,2\n", 2, None, "more fields"),
        ("nested.jsonl", '{"id": "a", "human_labels": {"H1": ["x"]}}\n', 1, "human_labels.H1", "one value"),
    ],
)
def test_load_errors_name_file_line_field(
    tmp_path: Path, name: str, text: str, line: int, field: str | None, message: str
) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        load_human_labels(p)
    assert info.value.path == str(p)
    assert info.value.line == line
    assert info.value.field == field


def test_load_unknown_type_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown file type") as info:
        load_human_labels(tmp_path / "x.xml")
    assert "jsonl" in info.value.choices
    with pytest.raises(InputError, match="not found"):
        load_human_labels(tmp_path / "absent.csv")


# --------------------------------------------------------------------------- report on synthetic data


def _humans_and_judgments(seed: int = 0, n: int = 60) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    cats = np.array(["calm", "worried", "crisis"])
    truth = rng.integers(0, 3, n)
    rows = []
    for h in ("H1", "H2", "H3"):
        lab = np.where(rng.random(n) < 0.75, truth, rng.integers(0, 3, n))
        rows += [{"id": f"c{i}", "rater": h, "value": cats[lab[i]]} for i in range(n)]
    human = pd.DataFrame(rows)
    judged = []
    for rep in range(3):
        lab = np.where(rng.random(n) < 0.85, truth, rng.integers(0, 3, n))
        for i in range(n):
            row = {
                "case_id": f"c{i}",
                "model": None,
                "sample": None,
                "protocol": "crisis-triage",
                "judge": "jx",
                "repeat": rep,
                "label": cats[lab[i]],
                "scores": "{}",
                "status": "ok",
                "reason": None,
            }
            if rep == 0 and i < 4:
                row.update(label=None, status="unscored", reason="parse_failure: no JSON object found")
            judged.append(row)
    judged.append({**judged[10], "case_id": "extra", "repeat": 0})
    return human, pd.DataFrame(judged), truth


def test_label_report_matches_direct_statistics() -> None:
    human, judged, _ = _humans_and_judgments()
    report = agreement_report(human, judged, n_boot=200, seed=1)
    assert not report.scale and report.headline == "kappa"
    hb = report.block("humans")
    hb_order = list(dict.fromkeys(human["id"]))
    wide = human.pivot(index="id", columns="rater", values="value").reindex(hb_order)
    table, _ = aggregate_raters(wide.to_numpy())
    assert hb.stats["fleiss_kappa"].value == pytest.approx(sm_fleiss(table), abs=1e-9)
    pair = next(p for p in hb.pairwise["kappa"].pairs if (p.a, p.b) == ("H1", "H2"))
    assert pair.estimate.value == pytest.approx(cohen_kappa(wide["H1"], wide["H2"], n_boot=0).value, abs=1e-9)

    jb = report.block("jx")
    assert jb.counts["unscored"] == 4 and jb.counts["unscored_reasons"] == {"parse_failure": 4}
    assert jb.counts["items_without_human_labels"] == 1 and jb.counts["repeats"] == 3
    assert any("4 unscored" in n for n in report.notes)
    # The judge's value per item is the majority over its ok repeats.
    j = judged[(judged.status == "ok") & (judged.case_id != "extra")]
    maj = j.groupby("case_id")["label"].agg(
        lambda s: s.value_counts().index[0] if s.value_counts().iloc[0] > 1 else s.iloc[0]
    )
    direct = cohen_kappa(maj.reindex(hb_order), wide["H1"], n_boot=0).value
    vs_h1 = next(p for p in jb.pairwise["kappa"].pairs if p.b == "H1")
    assert vs_h1.a == "jx"
    assert vs_h1.estimate.value == pytest.approx(direct, abs=1e-9)
    assert jb.self_consistency is not None and jb.self_consistency.value > 0.5
    assert jb.assessment is not None and jb.assessment.human is not None
    assert jb.assessment.verdict in ("Good", "Moderate", "Poor")


def test_report_renders_as_json_csv_and_rich(tmp_path: Path) -> None:
    human, judged, _ = _humans_and_judgments(seed=2, n=30)
    report = agreement_report(human, judged, n_boot=100)
    data = json.loads(report.to_json())
    assert [b["name"] for b in data["blocks"]] == ["humans", "jx"]
    out = tmp_path / "agree.csv"
    text = report.to_csv(out)
    assert out.read_text() == text
    frame = pd.read_csv(out)
    assert {"kappa_mean", "fleiss_kappa", "assessment"} <= set(frame["statistic"])
    console = Console(width=160, record=True)
    console.print(report.to_rich_table())
    rendered = console.export_text()
    assert "Cohen's kappa" in rendered and "jx" in rendered and "unscored" in rendered


def test_judge_copying_a_human_agrees_perfectly_with_that_human() -> None:
    human, _, _ = _humans_and_judgments(seed=3, n=40)
    h1 = human[human.rater == "H1"]
    judged = pd.DataFrame({"case_id": h1["id"], "judge": "copy", "label": h1["value"], "status": "ok", "repeat": 0})
    block = agreement_report(human, judged, n_boot=0).block("copy")
    vs = {p.b: p.estimate.value for p in block.pairwise["kappa"].pairs}
    assert vs["H1"] == pytest.approx(1.0)
    assert block.self_consistency is None


def _scale_data(n: int = 50) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(4)
    truth = rng.integers(1, 6, n)
    rows = []
    for h in ("H1", "H2"):
        vals = np.clip(truth + rng.integers(-1, 2, n), 1, 5).astype(float)
        vals[rng.random(n) < 0.05] = np.nan
        rows += [{"id": f"r{i}", "rater": h, "value": vals[i]} for i in range(n)]
    judged = []
    for rep in range(2):
        vals = np.clip(truth + 1 + rng.integers(-1, 1, n), 1, 5)  # a lenient judge
        judged += [
            {
                "case_id": f"r{i}",
                "model": "m",
                "sample": 0,
                "protocol": "appropriateness",
                "judge": "lenient",
                "repeat": rep,
                "label": None,
                "scores": json.dumps({"Appropriateness": int(vals[i])}),
                "status": "ok",
                "reason": None,
            }
            for i in range(n)
        ]
    return pd.DataFrame(rows), pd.DataFrame(judged)


def test_scale_report_reads_scores_and_flags_leniency() -> None:
    human, judged = _scale_data()
    report = agreement_report(human, judged, n_boot=200)
    assert report.scale and report.headline == "icc_a1"
    jb = report.block("lenient")
    assert jb.dimension == "Appropriateness"
    assert jb.assessment.leniency == "inflates"
    assert jb.stats["bias_vs_human_mean"].value > 0
    for key in ("kappa", "weighted_kappa", "icc_a1", "mae", "bias", "within_1"):
        assert jb.pairwise[key].mean.value is not None, key
    # MAE against H1 equals the direct computation on the per-item mean over repeats.
    j = judged.assign(v=judged.scores.map(lambda s: json.loads(s)["Appropriateness"]))
    per_item = j.groupby("case_id")["v"].mean()
    h1 = human[human.rater == "H1"].set_index("id")["value"]
    d = (per_item.reindex(h1.index) - h1).dropna()
    mae_h1 = next(p for p in jb.pairwise["mae"].pairs if p.b == "H1").estimate
    assert mae_h1.value == pytest.approx(d.abs().mean(), abs=1e-9)
    assert jb.self_consistency is not None  # ICC(A,1) over the two repeats
    console = Console(width=200, record=True)
    console.print(report.to_rich_table())
    text = console.export_text()
    assert "leniency" in text and "inflates" in text and "ICC(A,1)" in text


def test_report_input_errors() -> None:
    human, judged = _scale_data(10)
    two = judged.assign(scores=json.dumps({"a": 1, "b": 2}))
    with pytest.raises(InputError, match="several dimensions") as info:
        agreement_report(human, two, n_boot=0)
    assert info.value.choices == ["a", "b"]
    mixed = pd.concat([judged, judged.assign(protocol="other")])
    with pytest.raises(InputError, match="several protocols"):
        agreement_report(human, mixed, n_boot=0)
    assert agreement_report(human, mixed, protocol="other", n_boot=0).block("lenient") is not None
    multi = pd.concat([judged, judged.assign(model="m2")])
    with pytest.raises(InputError, match="several responses per case"):
        agreement_report(human, multi, n_boot=0)
    with pytest.raises(InputError, match="'rater'"):
        agreement_report(human.drop(columns="rater"))
    with pytest.raises(InputError, match="case_id"):
        agreement_report(human, judged.drop(columns="case_id"), n_boot=0)


def test_response_level_labels_match_on_model_and_sample() -> None:
    human, judged = _scale_data(20)
    human = human.assign(model="m", sample=0)
    multi = pd.concat([judged, judged.assign(model="m2", scores=json.dumps({"Appropriateness": 1}))])
    report = agreement_report(human, multi, n_boot=0)
    jb = report.block("lenient")
    assert jb.counts["items_without_human_labels"] == 20  # the m2 responses have no human ratings


def test_one_human_rater_has_no_human_range() -> None:
    human, judged = _scale_data(20)
    report = agreement_report(human[human.rater == "H1"], judged, n_boot=0)
    assert report.block("humans").pairwise["icc_a1"].mean.value is None
    assert report.block("lenient").assessment.human is None
    assert any("only one human" in n for n in report.notes)


# --------------------------------------------------------------------------- help_harm dev labels


def _llm_judgments() -> pd.DataFrame:
    rows = []
    folder = DATA / "help_harm" / "llm_crisis_labels"
    for name in ("gpt-4o-mini", "gpt-5-nano"):
        files = sorted(p for p in folder.glob(f"{name}-labeled*.dev.json") if "merged_labels" not in p.name)
        for rep, f in enumerate(files):
            for rec in json.loads(f.read_text()):
                ok = bool(rec["label"])
                rows.append(
                    {
                        "case_id": rec["id"],
                        "model": None,
                        "sample": None,
                        "protocol": "crisis-triage",
                        "judge": name,
                        "repeat": rep,
                        "label": rec["label"] if ok else None,
                        "scores": {},
                        "status": "ok" if ok else "unscored",
                        "reason": None if ok else "parse_failure",
                    }
                )
    return pd.DataFrame(rows)


@needs_data
def test_agree_on_help_harm_dev_labels() -> None:
    human = load_human_labels(DATA / "help_harm" / "human_crisis_labels.dev.jsonl")
    assert set(human["rater"]) == {"H1", "H2", "H3", "H4"} and human["id"].nunique() == 103
    report = agreement_report(human, _llm_judgments(), n_boot=300)
    hb = report.block("humans")
    assert hb.stats["fleiss_kappa"].value == pytest.approx(0.553, abs=0.005)
    assert hb.pairwise["kappa"].low == pytest.approx(0.412, abs=0.001)
    mini = report.block("gpt-4o-mini")
    assert mini.pairwise["kappa"].mean.value == pytest.approx(0.645, abs=0.01)
    assert mini.self_consistency.value > 0.9
    assert mini.assessment.human.within_human_range
    nano = report.block("gpt-5-nano")
    assert nano.counts["unscored"] == 1


@needs_data
def test_agree_on_help_harm_appropriateness_scale() -> None:
    path = DATA / "help_harm" / "appropriateness_scores.dev.jsonl"
    human = load_human_labels(path, field="human_scores")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    judged = pd.DataFrame(
        [
            {
                "case_id": r["id"],
                "judge": name,
                "status": "ok",
                "repeat": 0,
                "label": None,
                "scores": {"appropriateness": v},
            }
            for r in rows
            for name, v in r["judge_scores"].items()
        ]
    )
    report = agreement_report(human, judged, n_boot=200)
    hb = report.block("humans")
    assert hb.pairwise["within_1"].mean.value == pytest.approx(0.949, abs=0.001)
    assert hb.pairwise["mae"].mean.value == pytest.approx(0.520, abs=0.001)
    assert {b.name for b in report.blocks} == {"humans", "gpt-4o-mini", "gpt-5-nano", "meta-llama", "jury"}
