"""`mheval import`: published judge outputs become judgments in a new run folder, all or nothing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import openpyxl
import pytest

from mheval.analysis.importer import import_published
from mheval.errors import InputError
from mheval.runfolder.store import Store
from mheval.suites import load_suite

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "mentalalign").is_dir(), reason="../shared/data is absent")

ATTRS = ("Guidance", "Informativeness", "Relevance", "Safety", "Empathy", "Helpfulness", "Understanding")


def _ma_cell(score: int) -> str:
    body = {a: score for a in ATTRS} | {"Overall": score, "Explanation": 'Reads "warm" but thin.'}
    return "```json\n" + json.dumps(body) + "\n```"


def _write_judge_file(folder: Path, judge: str, rows: list[tuple[object, str, list[object]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["ConvID", "context", "judge_response_original", " judge_response_gpt4o"])
    for conv, context, cells in rows:
        sheet.append([conv, context, *cells])
    path = folder / f"judge_{judge}.xlsx"
    book.save(path)
    return path


def test_mentalalign_small_files(tmp_path: Path) -> None:
    rows = [
        (1, "I feel stuck at work.", [_ma_cell(4), _ma_cell(2)]),
        (2, '"Nobody listens to me."', [_ma_cell(5), "the judge wrote no JSON here"]),
        (3, "Should I quit my course?", [None, _ma_cell(6)]),
    ]
    src = tmp_path / "ma"
    _write_judge_file(src, "claude", rows)
    _write_judge_file(src, "o4-mini", rows)
    result = import_published("mentalalign", src, tmp_path / "run")
    assert (result.judgments, result.unscored, result.cases) == (12, 6, 3)
    assert result.by_judge == {"claude": 6, "o4-mini": 6}
    assert result.unscored_reasons == {"parse_failure": 4, "out_of_range": 2}
    with Store.open_existing(tmp_path / "run") as store:
        cases = {c.id: c for c in store.cases()}
        judgments = store.judgments()
        assert store.count("responses") == 0
    assert set(cases) == {"ma-1", "ma-2", "ma-3"} and cases["ma-2"].last_user_text == "Nobody listens to me."
    # The same ids as the suite reader gives for these files.
    assert [c.id for c in load_suite(f"mentalalign:{src / 'judge_claude.xlsx'}").cases] == ["ma-1", "ma-2", "ma-3"]
    one = next(j for j in judgments if (j.case_id, j.model, j.judge) == ("ma-1", "mentalalign/original", "claude"))
    assert one.protocol == "mentalalign" and one.sample == 0 and one.repeat == 0
    assert one.scores["guidance"] == 4 and one.scores["css"] == 4 and one.raw == _ma_cell(4)
    assert one.rationale == 'Reads "warm" but thin.'
    bad = next(j for j in judgments if (j.case_id, j.model, j.judge) == ("ma-3", "mentalalign/gpt4o", "o4-mini"))
    assert bad.status == "unscored" and bad.reason.startswith("out_of_range") and bad.raw == _ma_cell(6)


def _write_labels(folder: Path, name: str, labels: dict[str, str | None], merged: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for case_id, label in labels.items():
        rec = {
            "id": case_id,
            "dataset_id": "d1",
            "inputs": [f"Message of {case_id}.", "Second sentence."],
            "label": label,
        }
        rec |= {"all_labels": [label] * 3} if merged else {"explanation": "why", "tokens": 10}
        records.append(rec)
    (folder / name).write_text(json.dumps(records), encoding="utf-8")


def test_help_harm_small_files(tmp_path: Path) -> None:
    root = tmp_path / "help_harm"
    labels = root / "llm_crisis_labels"
    series = "judge-a-labeled-sampled_n_4-s42"
    _write_labels(labels, f"{series}-20250102-000000.dev.json", {"hh-val-000": "no_crisis", "hh-val-002": ""})
    _write_labels(labels, f"{series}-20250101-000000.dev.json", {"hh-val-000": "self-harm", "hh-val-002": "no_crisis"})
    _write_labels(
        labels, f"{series}-merged_labels.dev.json", {"hh-val-000": "self-harm", "hh-val-002": None}, merged=True
    )
    human = {
        "id": "hh-val-000",
        "human_labels": {"H1": "self-harm", "H2": "self-harm", "H3": "no_crisis", "H4": "self-harm"},
    }
    (root / "human_crisis_labels.dev.jsonl").write_text(json.dumps(human) + "\n", encoding="utf-8")
    result = import_published("help-harm", root, tmp_path / "run")
    assert (result.judgments, result.unscored, result.cases) == (6, 2, 2)
    assert result.by_judge == {"judge-a": 4, "judge-a:merged": 2}
    with Store.open_existing(tmp_path / "run") as store:
        cases = {c.id: c for c in store.cases()}
        judgments = {(j.case_id, j.judge, j.repeat): j for j in store.judgments()}
    assert cases["hh-val-000"].last_user_text == "Message of hh-val-000. Second sentence."
    assert cases["hh-val-000"].crisis_label == "self-harm" and cases["hh-val-002"].crisis_label is None
    # Runs are repeats in time order: the 0101 file is repeat 0.
    assert judgments[("hh-val-000", "judge-a", 0)].label == "self-harm"
    assert judgments[("hh-val-000", "judge-a", 1)].label == "no_crisis"
    empty = judgments[("hh-val-002", "judge-a", 1)]
    assert empty.status == "unscored" and empty.reason == "schema_violation" and '""' in (empty.reason_text or "")
    merged = judgments[("hh-val-000", "judge-a:merged", 0)]
    assert merged.protocol == "crisis-triage" and "published_majority_of_runs" in merged.flags
    assert judgments[("hh-val-002", "judge-a:merged", 0)].status == "unscored"


def test_bad_input_leaves_no_folder(tmp_path: Path) -> None:
    src = tmp_path / "ma"
    _write_judge_file(src, "claude", [(1, "I feel stuck.", [_ma_cell(4), _ma_cell(4)])])
    _write_judge_file(src, "gemini", [(1, "A different text for the same id.", [_ma_cell(4), _ma_cell(4)])])
    with pytest.raises(InputError, match="different text"):
        import_published("mentalalign", src, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["ma"]  # no staging folder left behind
    with pytest.raises(InputError, match="unknown source"):
        import_published("psycrisis", src, tmp_path / "run")
    with pytest.raises(InputError, match="no judge_"):
        import_published("mentalalign", tmp_path, tmp_path / "run2")
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "m-labeled-s-20250101-000000.json").write_text('{"not": "a list"}', encoding="utf-8")
    with pytest.raises(InputError, match="JSON array"):
        import_published("help-harm", tmp_path / "labels", tmp_path / "run3")
    assert not (tmp_path / "run3").exists()


def test_an_existing_run_is_never_overwritten(tmp_path: Path) -> None:
    src = tmp_path / "ma"
    _write_judge_file(src, "claude", [(1, "I feel stuck.", [_ma_cell(4), _ma_cell(3)])])
    import_published("mentalalign", src, tmp_path / "run")
    with pytest.raises(InputError, match="already exists"):
        import_published("mentalalign", src, tmp_path / "run")
    (tmp_path / "empty").mkdir()
    assert import_published("mentalalign", src, tmp_path / "empty").judgments == 2  # an empty folder is fine


@pytest.fixture(scope="module")
def ma_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, list]:
    run = tmp_path_factory.mktemp("ma") / "run"
    result = import_published("mentalalign", DATA / "mentalalign", run)
    with Store.open_existing(run) as store:
        return result, store.judgments()


@needs_data
def test_mentalalign_real_files_counts(ma_run: tuple) -> None:
    result, judgments = ma_run
    assert result.judgments == len(judgments) == 40_000 and result.cases == 1000
    assert result.unscored == 9 and result.unscored_reasons == {"parse_failure": 9}
    assert result.by_judge == {"claude": 10_000, "gemini": 10_000, "gpt-4o": 10_000, "o4-mini": 10_000}
    unscored = [j for j in judgments if j.status == "unscored"]
    assert len(unscored) == 9 and all(j.reason and j.scores == {} for j in unscored)
    assert Counter(j.model for j in judgments)["mentalalign/gpt4omini"] == 4000
    ok = [j for j in judgments if j.status == "ok"]
    assert all(1 <= j.scores[a.lower()] <= 5 for j in ok for a in ATTRS)


@needs_data
def test_help_harm_real_files_counts(tmp_path: Path) -> None:
    folder = DATA / "help_harm" / "llm_crisis_labels"
    records = {f.name: json.loads(f.read_text(encoding="utf-8")) for f in folder.glob("*.json")}
    expected = sum(len(r) for r in records.values())
    empty = sum(1 for r in records.values() for rec in r if not rec.get("label"))
    result = import_published("help-harm", DATA / "help_harm", tmp_path / "run")
    assert result.judgments == expected == 9150
    assert result.unscored == empty == 32
    assert result.cases == 103 + 2030
    with Store.open_existing(tmp_path / "run") as store:
        judgments = store.judgments()
        cases = {c.id: c for c in store.cases()}
    assert len({(j.case_id, j.judge, j.repeat) for j in judgments}) == expected
    repeats = Counter((j.judge, j.repeat) for j in judgments if j.case_id.startswith("hh-val"))
    assert repeats[("gpt-5-nano", 2)] == 103 and repeats[("gpt-4o-mini:merged", 0)] == 103
    assert sum(c.crisis_label is not None for c in cases.values()) > 80  # human majority attached to dev cases
