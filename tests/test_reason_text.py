"""Why a judgment or a parsed verdict went unscored reads the same way for both: "kind: detail", or the kind
alone, and nothing when it was scored."""

from __future__ import annotations

import pytest

from mheval.protocols.parse import Verdict
from mheval.records import Judgment, Reason

IDS = {"case_id": "c1", "protocol": "psycrisis", "judge": "offline", "model": "m", "sample": 0}


@pytest.mark.parametrize(
    ("reason", "detail", "text"),
    [
        (Reason.PARSE_FAILURE, "no JSON object in the output", "parse_failure: no JSON object in the output"),
        (Reason.REFUSED, None, "refused"),
        (Reason.PROVIDER_ERROR, "", "provider_error"),
    ],
)
def test_unscored_judgments_and_verdicts_say_why_alike(reason: Reason, detail: str | None, text: str) -> None:
    assert Judgment.unscored(reason, detail, **IDS).reason_text == text
    assert Verdict.fail(reason, detail).reason_text == text


def test_a_scored_judgment_has_no_reason_text() -> None:
    assert Judgment(status="ok", scores={"total": 3.0}, **IDS).reason_text is None
    assert Verdict(ok=True).reason_text is None


def test_a_stored_one_string_reason_reads_back_as_kind_and_detail() -> None:
    old = Judgment.model_validate({**IDS, "status": "unscored", "reason": "ungrounded: quote not in the reply"})
    assert (old.reason, old.detail, old.reason_text) == (
        Reason.UNGROUNDED,
        "quote not in the reply",
        "ungrounded: quote not in the reply",
    )
