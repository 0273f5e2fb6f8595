"""`agree RATINGS.csv --run RUN --corrected` with ratings keyed by case id alone (`id,rater,dimension,value`,
the form a rater fills in): paired with the run's replies when each case has one reply, else a clear exit 2
naming the column to add; never exit 0 with nothing paired."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from cli_inprocess import mheval
from mheval.records import Case, Judgment, Response, Turn
from mheval.runfolder.store import Store

N = 12
JUDGE_LEVELS = [1, 2, 3, 4, 5, 2, 3, 4, 1, 5, 4, 3]
HUMAN_LEVELS = [1, 3, 3, 4, 4, 2, 2, 4, 2, 5, 4, 4]


def _run(run_dir: Path, models: tuple[str, ...] = ("m",), samples: int = 1) -> Path:
    with Store.open(run_dir) as store:
        store.set_meta("config", {"suite": "ids", "models": list(models), "judges": ["offline"],
                                  "protocols": ["appropriateness"]})  # fmt: skip
        store.put_cases([Case(id=f"c{i:02d}", turns=[Turn(role="user", content=f"help {i}")],
                              crisis_label="suicidal_ideation") for i in range(N)])  # fmt: skip
        for model in models:
            for sample in range(samples):
                for i, level in enumerate(JUDGE_LEVELS):
                    key = {"case_id": f"c{i:02d}", "model": model, "sample": sample}
                    store.put_response(Response(**key, text=f"reply {i}"))
                    store.put_judgment(Judgment(protocol="appropriateness", judge="offline", total=float(level),
                                                scores={"appropriateness": float(level)}, **key))  # fmt: skip
    return run_dir


def _ratings(path: Path, *, with_unit: bool = False, ids: list[str] | None = None) -> Path:
    ids = ids or [f"c{i:02d}" for i in range(N)]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "rater", "dimension", "value", *(["model", "sample"] if with_unit else [])])
        for cid, level in zip(ids, HUMAN_LEVELS, strict=True):
            writer.writerow([cid, "ann", "appropriateness", level, *(["m", 0] if with_unit else [])])
    return path


def _corrected(ratings: Path, run: Path):
    args = ["agree", str(ratings), "--run", str(run), "--corrected", "--protocol", "appropriateness"]
    return mheval(*args, "--format", "json")


def _rows(result) -> dict:
    assert result.exit_code == 0, result.output
    return {(r["measure"], r["method"]): r for r in json.loads(result.stdout)["rows"]}


def test_ratings_keyed_by_case_id_pair_with_the_one_reply_of_each_case(tmp_path):
    run = _run(tmp_path / "run")
    by_id = _rows(_corrected(_ratings(tmp_path / "by-id.csv"), run))
    by_unit = _rows(_corrected(_ratings(tmp_path / "by-unit.csv", with_unit=True), run))
    ppi = by_id[("appropriateness", "ppi++")]
    assert ppi["n_human"] == N and ppi["corrected"] is not None
    assert ppi["corrected"] == pytest.approx(by_unit[("appropriateness", "ppi++")]["corrected"], abs=1e-12)
    assert ppi["ci"] == pytest.approx(by_unit[("appropriateness", "ppi++")]["ci"], abs=1e-12)


@pytest.mark.parametrize(("models", "samples", "column"), [(("a", "b"), 1, "model"), (("m",), 2, "sample")])
def test_several_replies_per_case_ask_for_the_column_that_tells_them_apart(tmp_path, models, samples, column):
    run = _run(tmp_path / "run", models, samples)
    result = _corrected(_ratings(tmp_path / "by-id.csv"), run)
    assert result.exit_code == 2, result.output
    assert f"`{column}`" in result.output and "column" in result.output


def test_ratings_of_no_judged_reply_are_an_error_not_an_empty_table(tmp_path):
    run = _run(tmp_path / "run")
    result = _corrected(_ratings(tmp_path / "other.csv", ids=[f"x{i}" for i in range(N)]), run)
    assert result.exit_code == 2, result.output
    assert "none of the" in result.output and "rated" in result.output
