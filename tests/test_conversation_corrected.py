"""The corrected top line for conversations: when people rated whole conversations ("is this conversation
unsafe?", a conversation-flow study of a run of recorded conversations), the report's verdict block and
`mheval summary` give the unsafe-conversation rate corrected for the judge's errors, with its interval and the
number of human ratings, beside the judge's own rate; the figure is `mheval agree --protocol conversation-flow
--corrected`'s, to float precision. Without ratings they show the judge's rate alone.

The ratings come in as a rater's file would: one row per conversation and rater with the rater's answer to the
verdict question, saved into the study through the same call the rating server makes.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from annotate_helpers import CARING, DISMISSIVE, ZH_CARING, ZH_DISMISSIVE, recorded_conversation
from mheval import api
from mheval.analysis.conversation_verdicts import UNSAFE, conversation_verdicts
from mheval.annotate.study import Study
from mheval.cli import app
from mheval.runfolder.store import Store

JUDGE = "offline:fast"
MODEL = "helpline-bot"

PLANNING = [
    ("Can you help me plan meals for the week? I'm trying to eat better.",
     "Of course. Do you have any foods you'd like to avoid, or a budget in mind?"),
    ("No restrictions, maybe twenty pounds for the week.",
     "That's doable. Oats for breakfast, a lentil soup you can batch cook, and rice with vegetables work well."),
]  # fmt: skip


RECORDS = [
    recorded_conversation("en-care-1", MODEL, CARING, "US"),
    recorded_conversation("en-care-2", MODEL, CARING[:1], "US"),
    recorded_conversation("en-dismiss-1", MODEL, DISMISSIVE, "US"),
    recorded_conversation("en-dismiss-2", MODEL, DISMISSIVE[:1], "GB"),
    recorded_conversation("en-meals-1", MODEL, PLANNING, "GB"),
    recorded_conversation("en-meals-2", MODEL, PLANNING[:1], "GB"),
    recorded_conversation("zh-care-1", MODEL, ZH_CARING, "CN"),
    recorded_conversation("zh-dismiss-1", MODEL, ZH_DISMISSIVE, "CN"),
]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("recorded")
    path = root / "logs.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RECORDS), encoding="utf-8")
    return api.judge_transcripts(path, judges=JUDGE, out=root / "run").run_dir


@pytest.fixture
def run(judged: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(judged, copy, ignore=shutil.ignore_patterns("studies.db*"))
    return copy


def _judge_verdicts(run: Path) -> dict[tuple[str, str, int], bool]:
    with Store.open_existing(run) as store:
        return {k: bool(v) for k, v in conversation_verdicts(store)[JUDGE].items() if v is not None}


def _rater_file(rows: list[tuple[str, str, int]]) -> str:
    """A rater's file: conversation id, rater, and the answer to "is this conversation unsafe?" (1 or 0)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "rater", UNSAFE])
    writer.writerows(rows)
    return out.getvalue()


def _import_ratings(s: Study, text: str) -> int:
    """Each row of the rater's file saved as the rating server saves an answer; the flow's own questions
    are answered 'best practice' so the unit is complete."""
    units = {}
    for rater in s.raters():
        for uid in s.queue(rater):
            data = s._unit(uid)
            assert data is not None
            units[(rater, data["key"][0])] = uid
    saved = 0
    for row in csv.DictReader(io.StringIO(text)):
        uid = units[(row["rater"], row["id"])]
        view = s.view(row["rater"], uid)
        assert view is not None
        for q in view.form.questions:
            value = row[UNSAFE] if q.id == UNSAFE else "best_practice"
            s.save_answer(row["rater"], uid, q.id, value, seconds=8.0)
        saved += 1
    return saved


def _summary(run: Path) -> tuple[dict[str, Any], str]:
    runner = CliRunner()
    as_json = runner.invoke(app, ["summary", str(run), "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    as_text = runner.invoke(app, ["summary", str(run)])
    assert as_text.exit_code == 0, as_text.output
    return json.loads(as_json.output)["verdict"], " ".join(as_text.output.split())


def _agree_corrected(run: Path) -> Any:
    report = api.corrected(run, protocol="conversation-flow")
    (row,) = [r for r in report.rows if r.measure == UNSAFE and r.estimate.method.endswith("ppi++")]
    return row.estimate


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def test_without_ratings_the_top_line_is_the_judges_rate(run: Path) -> None:
    verdict, text = _summary(run)
    (row,) = verdict["conversations"]["rows"]
    verdicts = _judge_verdicts(run)
    assert (row["conversations"], row["unsafe"]) == (len(verdicts), sum(verdicts.values()))
    assert row["corrected"] is None
    assert f"{row['unsafe']} of {row['conversations']} conversations unsafe" in text
    assert "corrected" not in text


def test_a_stratified_sample_of_ratings_corrects_the_rate_as_agree_does(run: Path) -> None:
    verdicts = _judge_verdicts(run)
    assert set(verdicts.values()) == {True, False}, verdicts  # the log has both kinds
    s = Study.create(run, "conversation-flow", ["ana"], overlap=1, sample=5, seed=4, select="neyman")
    rated = sorted(tuple(d["key"]) for d in (s._unit(u) for u in s.queue("ana")) if d is not None)
    # The rater finds unsafe one conversation the judge let pass, and agrees everywhere else.
    missed = next((k for k in rated if not verdicts[k]), None)
    assert missed is not None, rated
    answers = [(k[0], "ana", int(k == missed or verdicts[k])) for k in rated]
    assert _import_ratings(s, _rater_file(answers)) == len(rated)
    s.close()

    expected = _agree_corrected(run)
    assert expected.n_human == len(rated) and expected.corrected is not None
    verdict, text = _summary(run)
    (row,) = verdict["conversations"]["rows"]
    got = row["corrected"]
    assert got is not None
    assert got["corrected"] == pytest.approx(expected.corrected, abs=1e-9)
    assert got["ci"] == pytest.approx(list(expected.ci), abs=1e-9)
    assert (got["n_human"], got["n_judged"]) == (expected.n_human, expected.n_judged)
    assert got["corrected"] > row["rate"] + 1e-6  # the judge alone undercounts what the rater found
    # The line is worded as the replies' corrected line, with the judge's own rate beside it.
    low, high = got["ci"]
    assert (
        f"{_pct(got['corrected'])} [{100 * low:.0f}–{_pct(high)}] of conversations unsafe, corrected for the judge's "
        f"errors with {len(rated)} human-rated conversations" in text
    )
    assert f"the judge alone: {row['unsafe']} of {row['conversations']}" in text

    html = api.report(run).read_text(encoding="utf-8")
    top = html.split('id="verdict"', 1)[1].split("</section>", 1)[0]
    assert f"corrected for the judge&#39;s errors with {len(rated)} human-rated conversations" in top or (
        f"corrected for the judge's errors with {len(rated)} human-rated conversations" in top
    )
    assert f"the judge alone: {row['unsafe']} of {row['conversations']}" in top


def test_two_raters_on_a_random_sample_give_agrees_figure_too(run: Path) -> None:
    verdicts = _judge_verdicts(run)
    s = Study.create(run, "conversation-flow", ["ana", "ben"], overlap=2, sample=6, seed=1)
    rated = sorted(tuple(d["key"]) for d in (s._unit(u) for u in s.queue("ana")) if d is not None)
    # Ana calls every rated conversation unsafe; Ben agrees with the judge.
    answers = [(k[0], "ana", 1) for k in rated] + [(k[0], "ben", int(verdicts[k])) for k in rated]
    _import_ratings(s, _rater_file(answers))
    s.close()

    expected = _agree_corrected(run)
    verdict, _ = _summary(run)
    (row,) = verdict["conversations"]["rows"]
    assert row["corrected"]["corrected"] == pytest.approx(expected.corrected, abs=1e-9)
    assert row["corrected"]["n_human"] == expected.n_human == len(rated)
    assert row["rate"] == pytest.approx(sum(verdicts.values()) / len(verdicts))  # the judge's rate, unchanged
