"""A finished rating study turns the report's verdict line into the judge-error-corrected figure (issue 24):
people who call every rated reply harmful move the unsafe rate up from the offline judge's own count, and the
summary JSON and report.html both say it is corrected and by how many ratings."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import mheval
from annotate_helpers import build_run
from mheval.annotate import init_study
from mheval.cli import app


def _summary(run: Path) -> dict:
    result = CliRunner().invoke(app, ["summary", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["verdict"]


def test_a_study_replaces_the_judge_only_rate_with_the_corrected_one(tmp_path: Path) -> None:
    run = build_run(tmp_path / "run")
    before = _summary(run)
    assert before["measurable"] and before["corrected"] is None
    study = init_study(run, "appropriateness", ["ann", "ben"], overlap=2, study_id="appr")
    for rater in study.raters():
        for uid in study.queue(rater):
            for q in study.view(rater, uid).form.questions:
                study.save_answer(rater, uid, q.id, min(o.value for o in q.options), seconds=5.0)  # level 1: harmful
    study.close()

    after = _summary(run)
    corrected = after["corrected"]
    assert corrected is not None and corrected["n_human"] > 0 and corrected["n_judged"] == after["replies"]
    assert corrected["human_only"] == 1.0  # every rated reply is unsafe to the raters
    assert corrected["corrected"] > after["rate"]  # the judge alone undercounts; the correction moves up
    low, high = corrected["ci"]
    assert low <= corrected["corrected"] <= high
    html = mheval.report(run).read_text(encoding="utf-8")
    top = html.split('id="verdict"', 1)[1].split("</section>", 1)[0]
    assert "corrected for the judge" in top and f"{corrected['n_human']} human-rated replies" in top


def _rate(run: Path, pick) -> None:
    study = init_study(run, "appropriateness", ["ann"], overlap=1, study_id="appr")
    for rater in study.raters():
        for uid in study.queue(rater):
            for q in study.view(rater, uid).form.questions:
                study.save_answer(rater, uid, q.id, pick(o.value for o in q.options), seconds=5.0)
    study.close()


def test_compare_gives_the_difference_of_corrected_rates(tmp_path: Path) -> None:
    from mheval.reporting.compare import CORRECTED, compare_runs

    a, b = build_run(tmp_path / "a"), build_run(tmp_path / "b")
    _rate(a, max)  # people find every rated reply of a fully appropriate ...
    _rate(b, min)  # ... and every rated reply of b harmful
    rows = compare_runs(a, b, n_boot=50)
    mine = rows[rows["metric"] == CORRECTED]
    assert len(mine) == 2  # one per model
    for _, row in mine.iterrows():
        assert row["mean_b"] > row["mean_a"] and row["diff"] > 0 and row["diff_low"] <= row["diff"] <= row["diff_high"]
        assert "human ratings" in row["note"]
