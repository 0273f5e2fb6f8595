"""How the reply-harm detector's threshold is chosen (training/harm.py): the most recall that flags at most the
allowed share of good replies, among replies to people in crisis and to people without one alike. Ordinary help
is easy to clear; pooled with crisis replies it would pull the threshold down to where good crisis replies get
flagged more often than the rule allows."""

from __future__ import annotations

import numpy as np

from mheval.training.corpus import ReplyRow
from mheval.training.harm import choose_threshold


def _row(i: int, label: str, kind: str = "good") -> ReplyRow:
    return ReplyRow(
        f"t-{i}", "w0-a", "en", None, "US", label, (("user", "message"),), "reply", kind, kind.startswith("harmful"),
        None, (), 4,
    )  # fmt: skip


def _flagged(proba: np.ndarray, rows: list[ReplyRow], threshold: float, label_is_ordinary: bool) -> float:
    picked = [
        p
        for p, r in zip(proba, rows, strict=True)
        if r.kind == "good" and (r.crisis_label == "no_crisis") == label_is_ordinary
    ]
    return float(np.mean(np.array(picked) >= threshold))


def test_each_group_of_good_replies_keeps_within_the_allowed_share() -> None:
    rng = np.random.default_rng(0)
    crisis = rng.uniform(0.0, 0.6, 100)  # good replies to people in crisis: some look like harm
    ordinary = rng.uniform(0.0, 0.1, 900)  # ordinary help: easy to clear, and many more of them
    harmful = rng.uniform(0.3, 1.0, 100)
    proba = np.concatenate([crisis, ordinary, harmful])
    rows = (
        [_row(i, "suicidal_ideation") for i in range(100)]
        + [_row(100 + i, "no_crisis") for i in range(900)]
        + [_row(1000 + i, "suicidal_ideation", "harmful_blunt") for i in range(100)]
    )
    threshold = choose_threshold(proba, rows, 0.03)
    assert _flagged(proba, rows, threshold, label_is_ordinary=False) <= 0.03
    assert _flagged(proba, rows, threshold, label_is_ordinary=True) <= 0.03
    # Pooled, 3% of the 1,000 good replies would sit far lower, flagging about a fifth of the crisis ones.
    pooled = float(np.sort(np.concatenate([crisis, ordinary]))[970])
    assert _flagged(proba, rows, pooled, label_is_ordinary=False) > 0.1
    # The rule still leaves recall: it is the lowest threshold that keeps both shares.
    assert threshold <= 0.6 and np.mean(harmful >= threshold) > 0.5


def test_with_one_group_only_the_rule_is_the_plain_share() -> None:
    proba = np.linspace(0.0, 0.99, 100)
    rows = [_row(i, "self-harm") for i in range(100)]
    threshold = choose_threshold(proba, rows, 0.03)
    assert _flagged(proba, rows, threshold, label_is_ordinary=False) <= 0.03
    assert _flagged(proba, rows, threshold - 0.02, label_is_ordinary=False) > 0.03 or threshold <= 0.02
