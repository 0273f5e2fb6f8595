"""The tables of a run: the one-line-per-protocol summary, and every table of the HTML report."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from mheval.judges.grounding import ungrounded_rate
from mheval.labels import CRISIS_TRIAGE, DIALOGUE_SAFETY
from mheval.records import Judgment
from mheval.reporting.ungrounded import (
    UNGROUNDED_CLAIMS,
    UNGROUNDED_DEFINITIONS,
    UNGROUNDED_JUDGMENTS,
    ungrounded_definition,
)
from mheval.reporting.worst import DEFAULT_WORST
from mheval.runfolder.export import INJECTION_FLAG, counted_judgments, is_injected
from mheval.runfolder.store import Store

if TYPE_CHECKING:
    from mheval.reporting.cases import WorstCase
    from mheval.reporting.rundata import RunData

# The report's modules (and scipy with them) load only when a report is made, so that the plain
# summary printed after every run stays quick to import. DEFAULT_WORST and the ungrounded measures' names are
# defined in worst.py and ungrounded.py and kept here (__all__) for callers that import them from the tables.


# Where a case keeps the gold label that a label protocol's verdict is compared with.
GOLD_FIELDS = {CRISIS_TRIAGE: "crisis_label", DIALOGUE_SAFETY: "gold_safety_label"}


def summary_frame(run: RunData | Store) -> pd.DataFrame:
    """One row per protocol x model x judge: counts, unscored reasons, ungrounded claims and the headline number.

    ``ungrounded_claims`` is "k/n (rate)" (see UNGROUNDED_DEFINITIONS), empty where grounding was not checked.

    Judgments are read under the run's injection policy (runfolder/export.counted_judgments): under
    "exclude" the flagged ones are not counted at all (the headline says how many were left out);
    under "flag" the headline gives their share and the mean without them. Multi-turn judgments (per turn
    and per conversation) have rows too. Takes the run as read once (a RunData) or an open store.
    """
    if isinstance(run, Store):  # the older form: read the cases and judgments from the store
        cases, counted = {c.id: c for c in run.cases()}, counted_judgments(run)
    else:
        cases, counted = run.cases, run.counted_all
    groups: dict[tuple[str, str, str], list[Judgment]] = defaultdict(list)
    for j in counted.counted:
        groups[(j.protocol, j.model or "(user input)", j.judge)].append(j)
    left_out = Counter((j.protocol, j.model or "(user input)", j.judge) for j in counted.excluded)
    for key in left_out:
        groups.setdefault(key, [])

    rows = []
    for (protocol, model, judge), items in sorted(groups.items()):
        ok = [j for j in items if j.status == "ok"]
        n = len(items)
        reasons = Counter(str(j.reason) for j in items if j.status != "ok")
        claims, ungrounded, rate = ungrounded_rate(items).get(judge, (0, 0, None))
        row: dict[str, object] = {
            "protocol": protocol,
            "model": model,
            "judge": judge,
            "n": n,
            "ok": len(ok),
            "unscored": n - len(ok),
            "unscored_rate": f"{(n - len(ok)) / n:.1%}" if n else "",
            "unscored_reasons": ", ".join(f"{k} {v}" for k, v in reasons.most_common()) or "",
            UNGROUNDED_CLAIMS: f"{ungrounded}/{claims} ({rate:.1%})" if rate is not None else "",
            "headline": _headline(protocol, ok, cases)
            + _injection_headline(protocol, ok, cases, left_out[(protocol, model, judge)], counted.policy),
        }
        rows.append(row)
    return pd.DataFrame(
        rows,
        columns=[
            "protocol",
            "model",
            "judge",
            "n",
            "ok",
            "unscored",
            "unscored_rate",
            "unscored_reasons",
            UNGROUNDED_CLAIMS,
            "headline",
        ],
    )


def _headline(protocol: str, ok: list[Judgment], cases: dict) -> str:
    if not ok:
        return "no scored judgments"
    if any(j.label is not None for j in ok):
        labels = Counter(j.label for j in ok)
        top = ", ".join(f"{k} {v}" for k, v in labels.most_common(3))
        gold_field = GOLD_FIELDS.get(protocol)
        if gold_field:
            from mheval.judges.offline.validity import held_out_note, trained_on

            fresh = [j for j in ok if not trained_on(j.judge, protocol, getattr(cases.get(j.case_id), "source", None))]
            pairs = [(j.label, _gold(cases.get(j.case_id), gold_field)) for j in fresh]
            pairs = [(a, b) for a, b in pairs if b is not None]
            if pairs:
                acc = sum(a == b for a, b in pairs) / len(pairs)
                return f"agreement with gold {acc:.0%} (n={len(pairs)}); {top}"
            if len(fresh) < len(ok):  # every gold-labelled case was training data of this judge
                return f"{top}; {held_out_note(ok[0].judge, protocol)}"
        return top
    totals = [j.total for j in ok if j.total is not None]
    if totals:
        return f"mean total {sum(totals) / len(totals):.2f}"
    dims: dict[str, list[float]] = defaultdict(list)
    for j in ok:
        for k, v in j.scores.items():
            dims[k].append(v)
    return ", ".join(f"{k} {sum(v) / len(v):.2f}" for k, v in dims.items())


def _injection_headline(protocol: str, ok: list[Judgment], cases: dict, left_out: int, policy: str) -> str:
    """What the injection policy did to this headline: the excluded count, or the share and the clean mean."""
    if policy == "exclude":
        return f" ({left_out} flagged {INJECTION_FLAG} left out)" if left_out else ""
    flagged = [j for j in ok if is_injected(j)]
    if not flagged:
        return ""
    clean = [j for j in ok if not is_injected(j)]
    share = f"; {INJECTION_FLAG} {len(flagged)}/{len(ok)} ({len(flagged) / len(ok):.0%})"
    if any(j.label is not None for j in ok):
        return share
    return f"{share}; without them: {_headline(protocol, clean, cases)}"


def _gold(case: object, field: str) -> str | None:
    if case is None:
        return None
    value = getattr(case, field, None)
    if value is None:
        value = case.metadata.get(field)  # type: ignore[attr-defined]
    return value


# --------------------------------------------------------------------------- the report's tables


@dataclass
class ReportTables:
    """Every table of the report, computed once: frames by export name, notes, and the worst cases."""

    run: RunData
    frames: dict[str, pd.DataFrame]
    notes: dict[str, list[str]] = field(default_factory=dict)
    worst: list[WorstCase] = field(default_factory=list)

    def frame(self, name: str) -> pd.DataFrame:
        return self.frames.get(name, pd.DataFrame())


def report_tables(run: Any, *, redact: bool = False, n_boot: int = 1000, n_worst: int = DEFAULT_WORST) -> ReportTables:
    """All the report's numbers for a run (a RunData or a run folder)."""
    from mheval.reporting.cases import worst_cases, worst_frame
    from mheval.reporting.metrics import (
        appropriateness_by_category,
        gold_agreement,
        label_distribution,
        mentalalign_profile,
        psycrisis_by_category,
        psycrisis_dimensions,
    )
    from mheval.reporting.overview import judges_frame, models_frame, unscored_frame
    from mheval.reporting.reliability import flag_counts, human_agreement, self_consistency, ungrounded_judgments
    from mheval.reporting.rundata import RunData, load_run

    if not isinstance(run, RunData):
        run = load_run(run)
    agreement, agreement_notes = human_agreement(run, n_boot=n_boot)
    worst = worst_cases(run, n_worst, redact=redact)
    frames = {
        "run_models": models_frame(run),
        "run_judges": judges_frame(run),
        "unscored_reasons": unscored_frame(run),
        "appropriateness_by_category": appropriateness_by_category(run, n_boot=n_boot),
        "psycrisis_by_category": psycrisis_by_category(run, n_boot=n_boot),
        "psycrisis_dimensions": psycrisis_dimensions(run, n_boot=n_boot),
        "mentalalign_profile": mentalalign_profile(run, n_boot=n_boot),
        "dialogue_safety_labels": label_distribution(run, DIALOGUE_SAFETY),
        "dialogue_safety_gold": gold_agreement(run, DIALOGUE_SAFETY, GOLD_FIELDS[DIALOGUE_SAFETY]),
        "triage_labels": label_distribution(run, CRISIS_TRIAGE),
        "triage_gold": gold_agreement(run, CRISIS_TRIAGE, GOLD_FIELDS[CRISIS_TRIAGE]),
        "human_agreement": agreement,
        "self_consistency": self_consistency(run, n_boot=n_boot),
        UNGROUNDED_JUDGMENTS: ungrounded_judgments(run),
        "flags": flag_counts(run),
        "worst_cases": worst_frame(worst),
    }
    return ReportTables(run, frames, {"human_agreement": agreement_notes}, worst)


__all__ = [
    "DEFAULT_WORST",
    "GOLD_FIELDS",
    "UNGROUNDED_CLAIMS",
    "UNGROUNDED_DEFINITIONS",
    "UNGROUNDED_JUDGMENTS",
    "ReportTables",
    "report_tables",
    "summary_frame",
    "ungrounded_definition",
]
