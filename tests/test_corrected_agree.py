"""A finished study feeds `agree`: judge and human judgments of a unit are paired under every protocol (from the
study, its CSV export and its judgments export), `agree --corrected` gives judge-only, human-only and corrected
figures, a Neyman study stores its strata and inclusion probabilities, and `annotate status` says how many more
ratings would halve the interval."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mheval
from annotate_helpers import build_run
from mheval.annotate import Study, export_ratings, init_study, study_status
from mheval.cli import app

PROTOCOLS = ("psycrisis", "crisis-triage", "appropriateness")


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("corrected") / "run")


def _fresh(base: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(base, target, ignore=shutil.ignore_patterns("studies.db*"))
    return target


def _rate_all(s: Study, offset: int = 0) -> None:
    """Every rater answers every unit; ratings vary by unit so the statistics are defined."""
    for r, rater in enumerate(s.raters()):
        for i, uid in enumerate(s.queue(rater)):
            for q in s.view(rater, uid).form.questions:
                options = [o.value for o in q.options]
                pick = (i + offset + (r if i % 3 == 0 else 0)) % len(options)
                s.save_answer(rater, uid, q.id, options[pick], seconds=5.0)


def _judge_headline(report) -> list:
    payload = json.loads(report.to_json())
    blocks = [b for b in payload["blocks"] if b["kind"] == "judge"]
    assert blocks
    return blocks


@pytest.fixture(scope="module")
def rated(base_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = _fresh(base_run, tmp_path_factory.mktemp("rated"))
    for protocol in PROTOCOLS:
        s = init_study(folder, protocol, ["ann", "ben"], overlap=2, study_id=protocol)
        _rate_all(s)
        s.close()
        for fmt in ("csv", "judgments"):
            export_ratings(folder, fmt, study=protocol)
    return folder


def _defined_pairs(report) -> int:
    """How many judge-vs-human pair estimates have a value (kappa, and ICC for scales)."""
    count = 0
    for block in _judge_headline(report):
        for name, pw in block["pairwise"].items():
            if name in ("kappa", "icc_a1"):
                count += sum(p["value"] is not None for p in pw["pairs"])
    return count


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_judge_and_human_judgments_of_a_unit_are_paired(rated: Path, protocol: str) -> None:
    from_study = mheval.agree(rated, protocol=protocol)
    from_csv = mheval.agree(rated / f"ratings-{protocol}.csv", run=rated, protocol=protocol)
    from_judgments = mheval.agree(rated / f"ratings-{protocol}.jsonl", run=rated, protocol=protocol)
    for report in (from_study, from_csv, from_judgments):
        assert "no rater pair has a defined value" not in report.to_csv().split("offline", 1)[1]
        assert _defined_pairs(report) > 0
        blocks = _judge_headline(report)
        assert all(b["counts"]["items_matched"] == b["counts"]["items_judged"] for b in blocks)
        assert {b["name"] for b in blocks} == {"offline"}  # the exported human rows are not graded as a judge
    assert from_study.to_json() == from_csv.to_json() == from_judgments.to_json()


def test_status_and_agree_call_a_scale_the_same(rated: Path) -> None:
    status = study_status(rated, "psycrisis")
    assert {a.level for a in status.agreement} == {"ordinal"}
    report = json.loads(mheval.agree(rated, protocol="psycrisis").to_json())
    human = next(b for b in report["blocks"] if b["kind"] == "human")
    assert "ordinal" in human["stats"]["alpha"]["method"]
    assert {a.level for a in study_status(rated, "crisis-triage").agreement} == {"nominal"}


def test_agree_corrected_json_and_text(rated: Path) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["agree", str(rated), "--protocol", "psycrisis", "--corrected", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    payload = json.loads(shown.output)
    rows = payload["rows"]
    measures = {r["measure"] for r in rows}
    assert measures == {"empathy_collaboration", "emotion_regulation", "explore_concerns", "risk_assessment",
                        "external_support", "total"}  # fmt: skip
    for r in rows:
        assert {"judge_only", "human_only", "corrected", "ci", "n_human", "n_judged", "method"} <= set(r)
        assert r["small_n"] is True  # 14 rated units
    methods = {r["method"] for r in rows if r["measure"] == "risk_assessment"}
    assert methods == {"ppi++", "rogan-gladen"}
    assert {r["model"] for r in rows} >= {"(all)", "openai/model-beta"}
    total = next(r for r in rows if r["measure"] == "total" and r["model"] == "(all)")
    assert total["n_human"] == total["n_judged"] == 14 and total["corrected"] == pytest.approx(total["human_only"])
    text = runner.invoke(app, ["agree", str(rated / "ratings-appropriateness.csv"), "--run", str(rated),
                               "--protocol", "appropriateness", "--corrected"], env={"COLUMNS": "220"})  # fmt: skip
    assert text.exit_code == 0, text.output
    assert "appropriateness<=2" in text.output and "rogan-gladen" in text.output and "small n" in text.output


def test_corrected_report_on_a_partly_rated_run(base_run: Path, tmp_path: Path) -> None:
    folder = _fresh(base_run, tmp_path)
    s = init_study(folder, "crisis-triage", ["ann", "ben"], overlap=2, sample=4, seed=3)
    _rate_all(s)
    s.close()
    report = mheval.api.corrected(folder)
    (ppi, rg) = report.rows
    assert ppi.estimate.n_human == 4 and ppi.estimate.n_judged == 7 and ppi.model == "(all)"
    assert ppi.estimate.method == "ppi++" and rg.estimate.method == "rogan-gladen"
    assert ppi.estimate.judge_only == pytest.approx(6 / 7)


def test_neyman_study_stores_strata_and_inclusion_and_status_says_what_halves(base_run: Path, tmp_path: Path) -> None:
    folder = _fresh(base_run, tmp_path)
    s = init_study(folder, "appropriateness", ["ann", "ben"], overlap=1, sample=8, select="neyman", seed=1)
    design = s.design()
    assert design is not None
    kind, units, notes = design
    assert kind == "neyman" and len(units) == 14 and "Neyman allocation" in notes[0]
    planned = {tuple(u) for u in (json.loads(r[0]) for r in s._db.execute("SELECT unit_key FROM units"))}
    assert len(planned) == 8
    by_stratum: dict[str, list[tuple]] = {}
    for key, (stratum, p) in units.items():
        by_stratum.setdefault(stratum, []).append((key, p))
    for members in by_stratum.values():
        chosen = sum(k in planned for k, _ in members)
        assert all(p == pytest.approx(chosen / len(members)) for _, p in members)
        assert chosen >= min(2, len(members))
    _rate_all(s)
    s.close()
    status = study_status(folder)
    (precision,) = status.precision
    assert precision.estimate.method.startswith("stratified") and precision.estimate.n_human == 8
    assert precision.left_to_rate == 6
    assert precision.more_to_halve is None or precision.more_to_halve > 0
    assert "appropriateness (offline)" in precision.sentence()
    report = mheval.api.corrected(folder)
    assert report.design == "stratified"
    runner = CliRunner()
    shown = runner.invoke(app, ["annotate", "status", str(folder)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "halve" in shown.output or "cannot halve" in shown.output or "no corrected estimate" in shown.output
    with pytest.raises(mheval.InputError, match="--sample"):
        init_study(folder, "psycrisis", ["ann"], overlap=1, select="neyman", study_id="x")
    with pytest.raises(mheval.InputError, match="unknown selection"):
        init_study(folder, "psycrisis", ["ann"], overlap=1, select="nope", study_id="y")
