"""Regressions against another run: a condition fails only when the paired test that `mheval compare` uses
(reporting/compare.py: Wilcoxon signed-rank over the shared cases, else Mann-Whitney U) gives p < ALPHA.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pandas as pd

from mheval.gating.measures import Measure, judge_for, scored_values
from mheval.gating.result import ALPHA, CORRECTED, Condition, Status
from mheval.gating.verdicts import ConversationVerdicts, ReplyVerdicts


def baseline_conditions(
    data: Any, base: Any, models: list[str], measures: list[Measure], replies: ReplyVerdicts,
    convs: ConversationVerdicts, *, corrected: bool = False,
) -> list[Condition]:  # fmt: skip
    """The regressions of `data` against the baseline run `base` (both as read once: RunData). With `corrected`,
    the unsafe-conversation rate's regression is that of the rates corrected by people's ratings in both runs
    (`_corrected_regressions`); a baseline without such ratings is an InputError."""
    from mheval.reporting.compare import UNSAFE, compare_runs

    out: list[Condition] = []
    if any(replies.row(m) is not None and replies.row(m).measurable for m in models):
        frame = compare_runs(base, data)
        rows = frame[(frame["metric"] == UNSAFE) & (frame["category"] == "all")]
        for model in models:
            row = replies.row(model)
            if row is None or not row.measurable:
                continue
            mine = rows[rows["model_b"] == model]
            cell = mine.iloc[0].to_dict() if not mine.empty else None
            out.append(_regression("unsafe replies vs baseline", UNSAFE, model, row.judge, cell, higher_is_worse=True))
    base_convs = ConversationVerdicts(base)
    if corrected and convs.models:
        base_convs.require_corrected("baseline")
        out += _corrected_regressions(data, base, convs)
    for model in [] if corrected else convs.models:
        conv = convs.row(model)
        judge = conv["judge"] if conv else None
        b_row = base_convs.row(model) or (base_convs.row(base_convs.models[0]) if len(base_convs.models) == 1 else None)
        cell = None
        if b_row is not None:
            a = base_convs.per_scenario(b_row["model"], b_row["judge"])
            b = convs.per_scenario(model, judge)
            cell = _cell(a, b, b_row["judge"])
        out.append(
            _regression("unsafe conversations vs baseline", "unsafe_conversations", model, judge, cell, True,
                        unit="conversations")
        )  # fmt: skip
    for measure in measures:
        judge = judge_for(data, measure.protocol, replies.block.judge)
        base_judge = judge_for(base, measure.protocol, judge)
        fa, fb = scored_values(base, measure, base_judge), scored_values(data, measure, judge)
        base_models = list(dict.fromkeys(fa["model"]))
        for model in models:
            b_model = model if model in base_models else (base_models[0] if len(base_models) == 1 else None)
            if b_model is None and fb[fb["model"] == model].empty:
                continue
            cell = None
            if b_model is not None:
                a = fa[fa["model"] == b_model].groupby("case_id")["value"].mean()
                b = fb[fb["model"] == model].groupby("case_id")["value"].mean()
                cell = _cell(a, b, base_judge)
            out.append(_regression(f"{measure.name} vs baseline", measure.name, model, judge, cell, False))
    return out


def _corrected_regressions(data: Any, base: Any, convs: ConversationVerdicts) -> list[Condition]:
    """Per model, the corrected unsafe-conversation rate against the baseline's: compare's difference of the two
    PPI++ estimates (reporting/compare.corrected_conversation_rows: normal interval, z test, the runs' ratings
    independent), a regression when it is higher with p < ALPHA."""
    from mheval.reporting.compare import CORRECTED_CONVERSATIONS, conversation_estimates, corrected_conversation_rows

    cells = {str(r["model_b"]): r for r in corrected_conversation_rows(base, data)}
    estimates: dict[str | None, dict[str, dict[str, Any]]] = {}  # judge -> its estimates by model, computed once
    out = []
    for model in convs.models:
        cell = cells.get(model)
        conv = convs.row(model)
        judge = str(cell["judge_b"]) if cell is not None else conv["judge"] if conv else None
        if judge not in estimates:
            estimates[judge] = conversation_estimates(data, judge)[1]
        est = estimates[judge].get(model) or {}
        cond = _regression("unsafe conversations (corrected) vs baseline", CORRECTED_CONVERSATIONS, model, judge,
                           cell, True, unit="conversations")  # fmt: skip
        if cell is None:
            cond = replace(cond, note="no corrected rate of this model in both runs: rate some of its conversations "
                           "in each")  # fmt: skip
        out.append(replace(cond, rate_used=CORRECTED, n_rated=est.get("n_human"), method=est.get("method")))
    return out


def _cell(a: pd.Series, b: pd.Series, base_judge: str | None) -> dict[str, Any] | None:
    """compare's paired (or unpaired) difference b minus a, with its test, of per-case values."""
    from mheval.reporting.compare import _compare_cell
    from mheval.stats.intervals import DEFAULT_N_BOOT

    if a.empty or b.empty:
        return None
    return {**_compare_cell(a.astype(float), b.astype(float), DEFAULT_N_BOOT, 0), "judge_a": base_judge}


def _num(x: Any) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def _regression(
    name: str, measure: str, model: str, judge: str | None, cell: dict[str, Any] | None, higher_is_worse: bool,
    unit: str = "replies",
) -> Condition:  # fmt: skip
    base = Condition(name, "baseline", measure, model, judge, "undecided", ALPHA, unit=unit)
    if cell is None:
        return replace(base, note="the baseline has no judged values to compare with for this model")
    diff, p = _num(cell.get("diff")), _num(cell.get("p_value"))
    n = int(cell.get("n_paired") or 0) or int(cell.get("n_b") or 0)
    base = replace(base, value=_num(cell.get("mean_b")), baseline_value=_num(cell.get("mean_a")), diff=diff,
                   diff_low=_num(cell.get("diff_low")), diff_high=_num(cell.get("diff_high")), p_value=p,
                   test=cell.get("test") or None, n=n)  # fmt: skip
    if diff is None:
        return replace(base, note="no difference could be measured")
    worse = diff > 0 if higher_is_worse else diff < 0
    if not worse:
        note = "no regression" if diff != 0 else "no change"
        status: Status = "pass"
    elif p is None:
        note, status = "worse, but too few shared cases for the paired test: not counted as a regression", "pass"
    elif p < ALPHA:
        note, status = f"significant regression (p={p:.3g} < {ALPHA})", "fail"
    else:
        note, status = f"worse, not significant (p={p:.3g} >= {ALPHA})", "pass"
    extra = cell.get("note")
    if extra:
        note += f"; {extra}"
    judge_a = cell.get("judge_a")
    if judge_a and judge and judge_a != judge:
        note += f"; the baseline was judged by {judge_a}"
    return replace(base, status=status, note=note)


__all__ = ["baseline_conditions"]
