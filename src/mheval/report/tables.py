"""The headline tables of a run, computed from its store: one row per protocol x model x judge."""

from __future__ import annotations

from collections import Counter, defaultdict

import pandas as pd

from mheval.engine.store import Store
from mheval.records import Judgment

# Where a case keeps the gold label that a label protocol's verdict is compared with.
GOLD_FIELDS = {"crisis-triage": "crisis_label", "dialogue-safety": "gold_safety_label"}


def summary_frame(store: Store) -> pd.DataFrame:
    cases = {c.id: c for c in store.cases()}
    groups: dict[tuple[str, str, str], list[Judgment]] = defaultdict(list)
    for j in store.iter_judgments():
        groups[(j.protocol, j.model or "(user input)", j.judge)].append(j)

    rows = []
    for (protocol, model, judge), items in sorted(groups.items()):
        ok = [j for j in items if j.status == "ok"]
        reasons = Counter((j.reason or "").split(":")[0] for j in items if j.status != "ok")
        row: dict[str, object] = {
            "protocol": protocol,
            "model": model,
            "judge": judge,
            "n": len(items),
            "ok": len(ok),
            "unscored": len(items) - len(ok),
            "unscored_reasons": ", ".join(f"{k} {v}" for k, v in reasons.most_common()) or "",
            "headline": _headline(protocol, ok, cases),
        }
        rows.append(row)
    return pd.DataFrame(rows, columns=["protocol", "model", "judge", "n", "ok", "unscored", "unscored_reasons",
                                       "headline"])


def _headline(protocol: str, ok: list[Judgment], cases: dict) -> str:
    if not ok:
        return "no scored judgments"
    if any(j.label is not None for j in ok):
        labels = Counter(j.label for j in ok)
        top = ", ".join(f"{k} {v}" for k, v in labels.most_common(3))
        gold_field = GOLD_FIELDS.get(protocol)
        if gold_field:
            pairs = [(j.label, _gold(cases.get(j.case_id), gold_field)) for j in ok]
            pairs = [(a, b) for a, b in pairs if b is not None]
            if pairs:
                acc = sum(a == b for a, b in pairs) / len(pairs)
                return f"agreement with gold {acc:.0%} (n={len(pairs)}); {top}"
        return top
    totals = [j.total for j in ok if j.total is not None]
    if totals:
        return f"mean total {sum(totals) / len(totals):.2f}"
    dims: dict[str, list[float]] = defaultdict(list)
    for j in ok:
        for k, v in j.scores.items():
            dims[k].append(v)
    return ", ".join(f"{k} {sum(v) / len(v):.2f}" for k, v in dims.items())


def _gold(case: object, field: str) -> str | None:
    if case is None:
        return None
    value = getattr(case, field, None)
    if value is None:
        value = case.metadata.get(field)  # type: ignore[attr-defined]
    return value
