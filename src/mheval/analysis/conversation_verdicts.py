"""Each judge's verdict on each conversation of a multi-turn run (played or imported), as rows a judgments
table can hold: what a whole-conversation rating study stratifies by and what its ratings correct.

The verdict is `verdict.conversation_verdict`, built once by `runfolder.conversation_views` from the per-turn
judgments, the expectations and the flow; this module only lays it out per (conversation, model, sample)
and judge. A conversation the simulator failed (status `unscored`) has no verdict, as in the report.

`verdict_frame` gives the verdicts as judgments-table rows of protocol `conversation-flow` with one score,
``unsafe`` (1 unsafe, 0 not, no row when the verdict is unknown). People answer the same question on a
conversation-flow study's form (annotate/form.py), so `agree` pairs their answer with the judge's verdict
and the corrected estimates (analysis/corrected.py) read the unsafe-conversation rate like any binary
measure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from mheval.labels import CONVERSATION_FLOW
from mheval.records import Conversation, Exchange, Judgment
from mheval.runfolder.conversation_views import conversation_judges, views
from mheval.runfolder.store import Store

if TYPE_CHECKING:
    from mheval.conversations.scenario import Scenario

UNSAFE = "unsafe"
"""The question and score of a conversation's verdict: 1 unsafe, 0 not."""

Key = tuple[str, str, int]  # (conversation id, model, sample)


def conversation_verdicts(store: Store) -> dict[str, dict[Key, bool | None]]:
    """Judge -> conversation -> unsafe (None: the judge's verdicts do not decide it). Human raters' judgments
    stored in the run are left out: they are what the judges are checked against."""
    judgments = store.judgments()
    if not _judges(judgments):
        return {}
    return verdicts_of(store.scenarios(), store.exchanges(), store.conversations(), judgments)


def verdicts_of(
    scenarios: list[Scenario], exchanges: list[Exchange], conversations: list[Conversation], judgments: list[Judgment]
) -> dict[str, dict[Key, bool | None]]:
    """`conversation_verdicts` from the run's records as already read (a report's RunData)."""
    judges = _judges(judgments)
    if not judges:
        return {}
    failed = {(c.scenario_id, c.model, c.sample) for c in conversations if c.status != "ok"}
    out: dict[str, dict[Key, bool | None]] = {j: {} for j in judges}
    for v in views(scenarios, exchanges, conversations, judgments, judges):
        if v.judge is not None and v.key not in failed:
            out[v.judge][v.key] = v.verdict.unsafe
    return out


def _judges(judgments: list[Judgment]) -> list[str]:
    return [j for j in conversation_judges(judgments) if not j.startswith("human:")]


def verdict_frame(store: Store) -> pd.DataFrame:
    """The verdicts as judgments-table rows (case_id is the conversation id); see the module docstring."""
    return verdict_rows(conversation_verdicts(store))


def verdict_rows(verdicts: dict[str, dict[Key, bool | None]]) -> pd.DataFrame:
    """Judge -> conversation -> unsafe as judgments-table rows (an unknown verdict has no row)."""
    rows: list[dict[str, Any]] = []
    for judge, of_judge in verdicts.items():
        for (cid, model, sample), unsafe in of_judge.items():
            if unsafe is None:
                continue
            rows.append({"case_id": cid, "model": model, "sample": sample, "protocol": CONVERSATION_FLOW,
                         "judge": judge, "repeat": 0, "status": "ok", "label": None,
                         "scores": {UNSAFE: float(unsafe)}})  # fmt: skip
    columns = ["case_id", "model", "sample", "protocol", "judge", "repeat", "status", "label", "scores"]
    return pd.DataFrame(rows, columns=columns)
