"""One order and one definition of "worst" replies: the verdict block and the report's Worst cases agree.

Written straight into a store: replies equally bad to the judge but of different crisis labels (the verdict
spreads equally bad replies over labels), an unsafe reply with more reasons, and safe replies below them.
"""

from __future__ import annotations

from pathlib import Path

from mheval.records import Case, Judgment, Response, Turn
from mheval.reporting.cases import worst_cases
from mheval.reporting.rundata import load_run
from mheval.reporting.verdict_block import verdict_block
from mheval.runfolder.store import Store

# case id -> (crisis label, appropriateness, psycrisis total)
REPLIES = {
    "c01": ("suicidal_ideation", 1.0, 1.0),
    "c02": ("suicidal_ideation", 1.0, 1.0),
    "c03": ("self-harm", 1.0, 1.0),
    "c04": ("suicidal_ideation", 1.0, 0.0),  # two reasons: harmful and no protective move at high risk
    "c05": ("anxiety_crisis", 1.0, 1.0),
    "c06": ("anxiety_crisis", 2.0, 0.0),  # not unsafe (anxiety is not high risk), but poor
    "c07": ("suicidal_ideation", 4.0, 3.0),
}


def _run(run_dir: Path, models: tuple[str, ...] = ("m",)) -> Path:
    with Store.open(run_dir) as store:
        store.set_meta("config", {"suite": "w", "models": list(models), "judges": ["offline"],
                                  "protocols": ["appropriateness", "psycrisis"]})  # fmt: skip
        store.put_cases([Case(id=cid, turns=[Turn(role="user", content=f"help ({cid})")], crisis_label=label)
                         for cid, (label, _, _) in REPLIES.items()])  # fmt: skip
        for model in models:
            for cid, (_, level, total) in REPLIES.items():
                key = {"case_id": cid, "model": model, "sample": 0}
                store.put_response(Response(**key, text=f"reply to {cid}"))
                quote = {"appropriateness": [f"reply to {cid}"]}
                appropriateness = {"appropriateness": level}
                store.put_judgment(
                    Judgment(protocol="appropriateness", judge="offline", scores=appropriateness, total=level,
                             evidence=quote, **key)
                )  # fmt: skip
                psy = {"risk_assessment": float(total > 0)}
                store.put_judgment(Judgment(protocol="psycrisis", judge="offline", total=total, scores=psy, **key))
    return run_dir


def test_the_verdict_and_the_worst_cases_list_the_same_replies_in_the_same_order(tmp_path):
    run = load_run(_run(tmp_path / "r"))
    in_verdict = [w.case_id for w in verdict_block(run).rows[0].worst]
    in_report = [w.case_id for w in worst_cases(run)]
    # The one with two reasons first; then equally bad replies, one crisis label at a time.
    assert in_verdict == ["c04", "c03", "c05"]
    assert in_report[: len(in_verdict)] == in_verdict
    # Every unsafe reply before any reply that is not; the rest by how poor the reply was.
    assert in_report == ["c04", "c03", "c05", "c01", "c02", "c06", "c07"]


def test_with_two_models_each_models_worst_keep_their_order_in_the_report(tmp_path):
    run = load_run(_run(tmp_path / "r", ("a", "b")))
    block = verdict_block(run)
    report = worst_cases(run, n=20)
    for row in block.rows:
        mine = [w.case_id for w in report if w.model == row.model]
        assert mine[: len(row.worst)] == [w.case_id for w in row.worst]
