"""Human-label loading, reliability verdicts and the agreement report (synthetic and help_harm data)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from rich.console import Console
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from mheval.analysis.agree import agreement_report
from mheval.analysis.labels import load_human_labels
from mheval.errors import InputError
from mheval.stats import Estimate, assess, cohen_kappa, human_range, icc_bootstrap_ci, leniency, width_verdict

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


# --------------------------------------------------------------------------- unit of analysis: response sources

SOURCES = ("original", "claude", "gpt4o", "gpt4omini", "llama_3", "qwen_2", "ds_qwen")
JUDGES = ("anthropic/claude-3.7-sonnet", "openai/gpt-4o")


def _by_source(n_cases: int = 8, seed: int = 5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two humans and two judges (2 repeats each) scoring 'safety' of 7 sources' responses to the same cases."""
    rng = np.random.default_rng(seed)
    level = dict(zip(SOURCES, rng.uniform(1.5, 4.5, len(SOURCES)), strict=True))
    human, judged = [], []
    for s in SOURCES:
        for i in range(n_cases):
            truth = level[s] + rng.normal(0, 0.6)
            for h in ("H1", "H2"):
                v = float(np.clip(np.round(truth + rng.normal(0, 0.5)), 1, 5))
                if h == "H2" and i == 0:
                    v = np.nan  # H2 skipped this one
                human.append({"id": f"c{i}", "rater": h, "model": s, "value": v})
            for judge_name, lift in zip(JUDGES, (0.3, 0.8), strict=True):
                for rep in range(2):
                    v = float(np.clip(np.round(truth + lift + rng.normal(0, 0.7)), 1, 5))
                    unscored = i == 1 and rep == 0 and s == "llama_3"
                    judged.append(
                        {
                            "case_id": f"c{i}",
                            "model": s,
                            "sample": 0,
                            "protocol": "p",
                            "judge": judge_name,
                            "repeat": rep,
                            "label": None,
                            "scores": "{}" if unscored else json.dumps({"safety": v}),
                            "status": "unscored" if unscored else "ok",
                            "reason": "parse_failure" if unscored else None,
                        }
                    )
    human.append({"id": "only-humans", "rater": "H1", "model": "qwen_2", "value": 2.0})
    judged.append({**judged[0], "case_id": "only-judged"})
    # No judge scored case c7 of ds_qwen: the human value there has no partner.
    judged = [r for r in judged if not (r["case_id"] == "c7" and r["model"] == "ds_qwen")]
    return pd.DataFrame(human), pd.DataFrame(judged)


def _hand_icc(x: np.ndarray) -> tuple[float, float]:
    """ICC(C,1) and ICC(A,1) of an n x k matrix from the two-way ANOVA mean squares (McGraw & Wong)."""
    n, k = x.shape
    g = x.mean()
    msr = k * ((x.mean(axis=1) - g) ** 2).sum() / (n - 1)
    msc = n * ((x.mean(axis=0) - g) ** 2).sum() / (k - 1)
    mse = ((x - x.mean(axis=1, keepdims=True) - x.mean(axis=0) + g) ** 2).sum() / ((n - 1) * (k - 1))
    return (msr - mse) / (msr + (k - 1) * mse), (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)


def _source_means(human: pd.DataFrame, judged: pd.DataFrame, judge_name: str, drop: tuple[str, ...] = ()):
    """The (source -> human mean, judge mean) table computed directly, for comparison."""
    h = human.groupby(["id", "model"], sort=False)["value"].mean().rename("h")
    ok = judged[(judged.judge == judge_name) & (judged.status == "ok")]
    ok = ok.assign(v=ok.scores.map(lambda s: json.loads(s)["safety"]))
    j = ok.groupby(["case_id", "model"], sort=False)["v"].mean().rename("j")
    j.index = j.index.set_names(["id", "model"])
    both = pd.concat([h, j], axis=1, join="inner").dropna().reset_index()
    both = both[~both.model.isin(drop)]
    return both.groupby("model", sort=False)[["h", "j"]].mean().reindex([s for s in SOURCES if s not in drop])


def test_model_unit_icc_matches_the_hand_computation() -> None:
    human, judged = _by_source()
    report = agreement_report(human, judged, unit="model", n_boot=300, seed=3)
    assert report.unit == "model" and not report.leave_own_model_out
    for judge_name in JUDGES:
        block = report.block(judge_name)
        means = _source_means(human, judged, judge_name)
        assert block.sources == SOURCES and block.excluded_sources == () and block.n_items == len(SOURCES)
        for s in SOURCES:
            assert block.source_means[s]["human"] == pytest.approx(means.at[s, "h"], abs=1e-12)
            assert block.source_means[s]["judge"] == pytest.approx(means.at[s, "j"], abs=1e-12)
        matrix = means.to_numpy()
        c1, a1 = _hand_icc(matrix)
        assert block.stats["icc_c1"].value == pytest.approx(c1, abs=1e-9)
        assert block.stats["icc_a1"].value == pytest.approx(a1, abs=1e-9)
        long = pd.DataFrame(matrix).reset_index().melt(id_vars="index", var_name="rater", value_name="score")
        pg_icc = pg.intraclass_corr(long, "index", "rater", "score").set_index("Type")["ICC"]
        assert block.stats["icc_c1"].value == pytest.approx(pg_icc["ICC(C,1)"], abs=1e-9)
        assert block.stats["icc_a1"].value == pytest.approx(pg_icc["ICC(A,1)"], abs=1e-9)
        # The interval is the seeded bootstrap over the sources, in their order of appearance.
        boot = icc_bootstrap_ci(matrix, "A,1", n_boot=300, seed=3)
        assert (block.stats["icc_a1"].ci_low, block.stats["icc_a1"].ci_high) == (boot.ci_low, boot.ci_high)
        assert block.stats["icc_a1"].n == len(SOURCES)
        bias = block.stats["bias_vs_human_mean"]
        assert bias.value == pytest.approx(float((matrix[:, 1] - matrix[:, 0]).mean()), abs=1e-12)
        assert block.verdicts == {
            "icc_c1": width_verdict(block.stats["icc_c1"]),
            "icc_a1": width_verdict(block.stats["icc_a1"]),
        }
        assert block.assessment.statistic == "icc_a1" and block.assessment.verdict == block.verdicts["icc_a1"]
        assert block.counts["sources_without_pairs"] == []
        assert block.counts["items_without_human_labels"] == (judge_name == JUDGES[0])  # 'only-judged'
        assert block.counts["items_used"] == len(SOURCES) * 8 - 1
    assert report.block(JUDGES[1]).assessment.leniency == "inflates"  # the judge that adds 0.8
    assert report.block(JUDGES[0]).counts["unscored"] == 1

    # Humans: each rater's per-source mean; the judges' human range is H1 vs H2 over the same sources.
    rater_means = human.groupby(["model", "rater"])["value"].mean().unstack()
    rater_means = rater_means.reindex(list(SOURCES))
    hb = report.block("humans")
    assert hb.unit == "model" and hb.sources == SOURCES
    assert hb.source_means["qwen_2"]["H1"] == pytest.approx(
        human[(human.model == "qwen_2") & (human.rater == "H1")]["value"].mean(), abs=1e-12
    )
    h_c1, h_a1 = _hand_icc(rater_means[["H1", "H2"]].to_numpy())
    assert hb.pairwise["icc_a1"].mean.value == pytest.approx(h_a1, abs=1e-9)
    assert hb.pairwise["icc_c1"].mean.value == pytest.approx(h_c1, abs=1e-9)
    human_range = report.block(JUDGES[0]).assessment.human
    assert human_range is not None and human_range.n_pairs == 1
    assert human_range.low == pytest.approx(h_a1, abs=1e-9)


def test_leave_own_model_out_drops_the_judges_family() -> None:
    human, judged = _by_source()
    report = agreement_report(human, judged, unit="model", leave_own_model_out=True, n_boot=200, seed=1)
    assert report.leave_own_model_out
    claude, gpt = report.block(JUDGES[0]), report.block(JUDGES[1])
    assert claude.excluded_sources == ("claude",)
    assert claude.sources == tuple(s for s in SOURCES if s != "claude")
    assert gpt.excluded_sources == ("gpt4o", "gpt4omini")
    assert gpt.n_items == 5 and gpt.counts["items_excluded_own_model"] == 16
    for block, drop in ((claude, ("claude",)), (gpt, ("gpt4o", "gpt4omini"))):
        c1, a1 = _hand_icc(_source_means(human, judged, block.name, drop).to_numpy())
        assert block.stats["icc_c1"].value == pytest.approx(c1, abs=1e-9)
        assert block.stats["icc_a1"].value == pytest.approx(a1, abs=1e-9)
        assert not set(drop) & set(block.source_means)
    assert any("own-family source(s) left out: gpt4o, gpt4omini" in n for n in report.notes)

    # A caller's own rule: leave out only the exact own model, as MentalAlign did.
    exact = agreement_report(
        human,
        judged,
        unit="model",
        leave_own_model_out=True,
        own_model=lambda judge, source: (judge, source) == ("openai/gpt-4o", "gpt4o"),
        n_boot=0,
    )
    assert exact.block(JUDGES[1]).excluded_sources == ("gpt4o",)
    assert exact.block(JUDGES[0]).excluded_sources == ()

    # Item unit: the judge's values on its own family's responses are dropped from every statistic.
    items = agreement_report(human, judged, leave_own_model_out=True, n_boot=0)
    gi = items.block(JUDGES[1])
    assert gi.excluded_sources == ("gpt4o", "gpt4omini") and "gpt4o" not in gi.sources
    assert gi.counts["items_excluded_own_model"] == 16
    assert gi.counts["values_excluded_own_model"] == 32  # 2 repeats each
    kept_items = 8 * 5 - 1  # ds_qwen c7 has no judgment
    assert next(p for p in gi.pairwise["mae"].pairs if p.b == "H1").estimate.n == kept_items
    full = agreement_report(human, judged, n_boot=0).block(JUDGES[1])
    assert next(p for p in full.pairwise["mae"].pairs if p.b == "H1").estimate.n == kept_items + 16


def test_leave_own_model_out_uses_the_judges_family_rule() -> None:
    # A distilled model belongs to both its families (mheval.models.families.same_family): a DeepSeek judge
    # leaves out ds_qwen; a Qwen judge leaves out qwen_2 and ds_qwen.
    human, judged = _by_source()
    renamed = judged.assign(
        judge=judged.judge.map(dict(zip(JUDGES, ("deepseek/deepseek-chat", "Qwen/Qwen3-8B"), strict=True)))
    )
    report = agreement_report(human, renamed, unit="model", leave_own_model_out=True, n_boot=0)
    assert report.block("deepseek/deepseek-chat").excluded_sources == ("ds_qwen",)
    assert report.block("Qwen/Qwen3-8B").excluded_sources == ("qwen_2", "ds_qwen")


def test_model_unit_input_errors() -> None:
    human, judged, _ = _humans_and_judgments(n=10)
    with pytest.raises(InputError, match="needs numeric scores") as info:
        agreement_report(human, judged, unit="model", n_boot=0)
    assert info.value.field == "unit"
    sh, sj = _scale_data(10)
    with pytest.raises(InputError, match="unknown unit") as info:
        agreement_report(sh, sj, unit="source", n_boot=0)
    assert info.value.choices == ["item", "model"]
    with pytest.raises(InputError, match="response source is unknown") as info:
        agreement_report(sh, sj.drop(columns="model"), unit="model", n_boot=0)
    assert info.value.field == "model"
    # Without a model column in the human labels, a case judged under two models is ambiguous.
    two = pd.concat([sj, sj.assign(model="m2")]).drop(columns="sample")
    with pytest.raises(InputError, match="several models"):
        agreement_report(sh, two, unit="model", n_boot=0)


def test_model_unit_matches_on_case_id_when_humans_lack_model() -> None:
    human, judged = _by_source()
    one = judged[judged.model == "gpt4o"]
    h = human[(human.model == "gpt4o")].drop(columns="model")
    block = agreement_report(h, one, unit="model", n_boot=0).block(JUDGES[0])
    assert block.sources == ("gpt4o",) and block.source_means["gpt4o"]["items"] == 8
    assert block.stats["icc_a1"].value is None  # one source: no ICC, said so
    assert "two items" in block.stats["icc_a1"].note


def test_model_unit_renders_unit_and_sources(tmp_path: Path) -> None:
    human, judged = _by_source()
    report = agreement_report(human, judged, unit="model", leave_own_model_out=True, n_boot=100)
    data = json.loads(report.to_json())
    assert data["unit"] == "model" and data["leave_own_model_out"] is True
    gpt = next(b for b in data["blocks"] if b["name"] == JUDGES[1])
    assert gpt["excluded_sources"] == ["gpt4o", "gpt4omini"] and len(gpt["sources"]) == 5
    assert set(gpt["verdicts"]) == {"icc_c1", "icc_a1"} and "claude" in gpt["source_means"]
    frame = pd.read_csv(io.StringIO(report.to_csv(tmp_path / "m.csv")), keep_default_na=False)
    assert set(frame["unit"]) == {"model"}
    sources = frame[(frame.block == JUDGES[1]) & (frame.statistic == "sources")]
    assert sources["note"].item().endswith("excluded: gpt4o, gpt4omini") and sources["n"].item() == "5"
    assert len(frame[(frame.block == JUDGES[1]) & (frame.statistic == "source_mean")]) == 10  # 5 x human, judge
    assert set(frame[frame.statistic == "verdict"]["a"]) == {"icc_c1", "icc_a1"}
    assert {"icc_c1", "icc_a1", "bias_vs_human_mean"} <= set(frame["statistic"])
    console = Console(width=220, record=True)
    console.print(report.to_rich_table())
    text = console.export_text()
    assert "unit: response source means" in text and "own model family left out" in text
    assert "ICC(C,1) over source means" in text and "gpt4o, gpt4omini" in text
    item_csv = pd.read_csv(io.StringIO(agreement_report(human, judged, n_boot=0).to_csv()))
    assert set(item_csv["unit"]) == {"item"}


def _mentalalign_long(folder: Path, judge: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MentalAlign's human scores and one judge's outputs as mheval's long tables (one rater, 'human')."""
    from mheval.analysis import reproduce as ma

    human_cells, _ = ma._human_cells(ma._read_sheet(folder / "human_scores.xlsx", "human_response_"))
    _, parse = ma._judge_parser("minimal")
    judge_cells, _ = ma._judge_cells(ma._read_sheet(folder / f"judge_{judge}.xlsx", "judge_response_"), parse)
    human_parts, judge_rows = [], []
    for s in ma.SOURCES:
        h = human_cells[s]
        rows = np.flatnonzero(np.isfinite(h).all(axis=1))  # unusable cells are absent, as in the paper
        for ai, attr in enumerate(ma.ATTRIBUTES):
            human_parts.append(
                pd.DataFrame(
                    {
                        "id": [f"r{i}" for i in rows],
                        "rater": "human",
                        "model": s,
                        "dimension": attr,
                        "value": h[rows, ai],
                    }
                )
            )
        for i, cell in enumerate(judge_cells[s]):
            ok = bool(np.isfinite(cell).all())
            judge_rows.append(
                {
                    "case_id": f"r{i}",
                    "model": s,
                    "sample": 0,
                    "judge": judge,
                    "repeat": 0,
                    "scores": dict(zip(ma.ATTRIBUTES, cell.tolist(), strict=True)) if ok else {},
                    "status": "ok" if ok else "unscored",
                    "reason": None if ok else "parse_failure",
                }
            )
    return pd.concat(human_parts, ignore_index=True), pd.DataFrame(judge_rows)


@pytest.mark.skipif(not (DATA / "mentalalign").is_dir(), reason="../shared/data/mentalalign is absent")
def test_model_unit_reproduces_mentalalign_for_the_claude_judge() -> None:
    from mheval.analysis.reproduce import ATTRIBUTES, reproduce_mentalalign

    human, judged = _mentalalign_long(DATA / "mentalalign", "claude")
    report = agreement_report(human, judged, unit="model", leave_own_model_out=True, n_boot=200, seed=0)
    ref = reproduce_mentalalign(DATA, n_boot=200, seed=0, parser="minimal")["judges"]["claude"]
    for attr in ATTRIBUTES:
        block, want = report.block("claude", attr), ref["attributes"][attr]
        assert block.excluded_sources == ("claude",) and list(block.sources) == ref["sources"]
        for key in ("icc_c1", "icc_a1"):
            got = block.stats[key]
            assert got.value == pytest.approx(want[key]["value"], abs=1e-6), (attr, key)
            assert got.ci_low == pytest.approx(want[key]["ci_low"], abs=1e-6)
            assert got.ci_high == pytest.approx(want[key]["ci_high"], abs=1e-6)
            assert block.verdicts[key] == want[key]["verdict"]
        assert {s: m["items"] for s, m in block.source_means.items()} == want["rows_used"]


def test_response_level_labels_from_a_file_feed_the_model_unit(tmp_path: Path) -> None:
    human, judged = _by_source()
    path = tmp_path / "labels.csv"
    human.assign(sample=0).to_csv(path, index=False)
    loaded = load_human_labels(path)
    assert list(loaded.columns) == ["id", "rater", "value", "model", "sample"]
    assert set(loaded["sample"]) == {"0"}
    report = agreement_report(loaded, judged, unit="model", n_boot=0)
    direct = agreement_report(human, judged, unit="model", n_boot=0)
    for name in JUDGES:
        assert report.block(name).stats["icc_a1"].value == pytest.approx(direct.block(name).stats["icc_a1"].value)
    with pytest.raises(InputError, match=r"duplicate rating.*model 'claude'"):
        path.write_text("id,rater,model,value\nc1,H1,claude,3\nc1,H1,gpt4o,4\nc1,H1,claude,5\n")
        load_human_labels(path)
