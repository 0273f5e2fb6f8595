"""`gate`: a run's verdicts as a pass/fail a CI pipeline can act on (`mheval gate RUN`, `mheval.gate(run, ...)`).

Reads a run folder's verdicts, never a model. What it gates:

- `max_unsafe`: per model, the unsafe rate by verdict.py's one definition, as the verdict at the top of
  the report counts it (reporting/verdict_block.py: judged replies, the run's primary judge); for a
  multi-turn run, the unsafe *conversation* rate (reporting/multiturn.conversation_verdicts). The rate
  carries a 95% Wilson interval.
- `mins`: per model, the mean of a protocol's score (`appropriateness`, `psycrisis` total) or of one of
  its dimensions or aggregates (`psycrisis.risk_assessment`, `mentalalign.css`) over the scored replies
  (first scored repeat, the primary judge), with the report's bootstrap interval that resamples cases.
- `baseline`: per model, a regression against another run (unsafe rate higher, or a `--min` measure
  lower) fails only when the paired test that `mheval compare` uses (reporting/compare.py: Wilcoxon
  signed-rank over the shared cases, else Mann-Whitney U) gives p < 0.05.

- `corrected`: the unsafe-conversation conditions (`max_unsafe`, and `baseline`'s regression) decide on the
  rate corrected for the judge's errors by people's answers to "is this conversation unsafe?" (the run's newest
  conversation-flow rating study: reporting/multiturn.corrected_conversations, PPI++ with its 95% interval)
  instead of the judge's own count. Asked for on a run without such ratings (or a baseline without them), or
  with nothing it could apply to, it is bad input: never a silent fall-back to the judge's count. A model
  none of whose conversations was rated has no corrected rate: its condition is undecided.

`on="upper"` (the default) decides on the interval's conservative side: the *upper* bound of the unsafe
rate must be at or under the threshold, and the *lower* bound of a mean at or over its minimum.
`on="point"` decides on the point estimates. Every model of the run must pass every condition.

Exit codes: 0 every condition holds; 1 one fails; 2 bad input (InputError); 3 not enough judged units to
decide one condition (and none failed): no reply could be judged for harm, or a `--min` protocol has no
scored verdict. A decided failure wins over an undecided condition: the run is known to fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mheval.errors import InputError
from mheval.gating.baseline import baseline_conditions
from mheval.gating.measures import Measure, check_inputs, judge_for, scored_values
from mheval.gating.result import CORRECTED, JUDGE, Condition, Failure, GateResult
from mheval.gating.verdicts import ConversationVerdicts, ReplyVerdicts
from mheval.reporting.rundata import RunData, load_run


def gate(
    run: str | Path | RunData,
    *,
    max_unsafe: float | None = None,
    mins: Mapping[str, float] | None = None,
    baseline: str | Path | RunData | None = None,
    on: str = "upper",
    corrected: bool = False,
) -> GateResult:
    """Gate a run (see the module docstring): a run folder, read once, or the run as read (a RunData); the
    same for `baseline`. Raises InputError on bad input (exit code 2)."""
    max_unsafe, measures = check_inputs(max_unsafe, dict(mins or {}), on)
    if max_unsafe is None and not measures and baseline is None:
        raise InputError("nothing to gate: give --max-unsafe, --min or --baseline", field="max-unsafe")
    if corrected and max_unsafe is None and baseline is None:
        raise InputError("--corrected decides the unsafe-conversation rate: give --max-unsafe (or --baseline) with it",
                         field="corrected")  # fmt: skip
    run_dir = _existing_run(run, "run")
    base_dir = _existing_run(baseline, "baseline") if baseline is not None else None
    data = _loaded(run, run_dir)
    replies = ReplyVerdicts(data)
    convs = ConversationVerdicts(data)
    if corrected:
        convs.require_corrected("run")
    notes: list[str] = []
    conditions: list[Condition] = []
    models = list(dict.fromkeys([*data.models, *convs.models]))
    if not models:
        notes.append("the run has no replies and no conversations")
    if max_unsafe is not None:
        for model in models:
            conditions += _unsafe_conditions(model, max_unsafe, on, replies, convs, corrected)
    for measure, minimum in measures:
        for model in models:
            conditions.append(_min_condition(model, measure, minimum, on, replies, convs))
    if baseline is not None and base_dir is not None:
        base = _loaded(baseline, base_dir)
        conditions += baseline_conditions(data, base, models, [m for m, _ in measures], replies, convs,
                                          corrected=corrected)  # fmt: skip
    if convs.models and measures:
        notes.append(
            "multi-turn run: --min reads the scores of single-turn replies; the per-turn scores of conversations "
            "are not gated (gate conversations with --max-unsafe)"
        )
    if corrected and any(c.measure == "unsafe_rate" for c in conditions):
        notes.append(
            "--corrected applies to the unsafe-conversation rate; the unsafe-reply rate is the judge's own count"
        )
    return GateResult(run_dir, base_dir, on, tuple(conditions), tuple(notes), corrected=corrected)


def _existing_run(run: str | Path | RunData, name: str) -> Path:
    from mheval.runfolder.store import Store

    run_dir = run.run_dir if isinstance(run, RunData) else Path(run)
    if not (run_dir / Store.FILENAME).is_file():
        raise InputError(f"not a run folder (no {Store.FILENAME})", path=run_dir, field=name)
    return run_dir


def _loaded(run: str | Path | RunData, run_dir: Path) -> RunData:
    """The run as read once: as given, or read from its folder."""
    return run if isinstance(run, RunData) else load_run(run_dir)


def _pct(x: float) -> str:
    return f"{round(x * 100, 2):g}%"


def _rate_condition(
    name: str, measure: str, model: str, judge: str | None, threshold: float, on: str, unsafe: int, n: int,
    value: float | None, low: float | None, high: float | None, unit: str, failures: tuple[Failure, ...],
    why_not: str | None,
) -> Condition:  # fmt: skip
    base = Condition(name, "max_unsafe", measure, model, judge, "undecided", threshold, on, n=n, unit=unit,
                     count=unsafe if n else None, rate_used=JUDGE)  # fmt: skip
    if not n or value is None:
        return replace(base, note=why_not or f"no judged {unit}")
    decided = high if on == "upper" else value
    assert decided is not None
    ok = decided <= threshold + 1e-12
    side = "upper bound" if on == "upper" else "rate"
    note = f"{side} {_pct(decided)} {'<=' if ok else '>'} {_pct(threshold)}"
    return replace(base, status="pass" if ok else "fail", value=value, low=low, high=high, decided_on=decided,
                   note=note, failures=failures)  # fmt: skip


def _corrected_condition(model: str, threshold: float, on: str, conv: dict[str, Any],
                         failures: tuple[Failure, ...]) -> Condition:  # fmt: skip
    """The unsafe-conversation rate corrected by people's ratings (conv["corrected"]) against the threshold."""
    est = conv.get("corrected") or {}
    n_rated = int(est.get("n_human") or 0)
    base = Condition(f"unsafe conversations (corrected) <= {_pct(threshold)}", "max_unsafe",
                     "unsafe_conversations_corrected", model, conv["judge"], "undecided", threshold, on,
                     n=conv["conversations"], unit="conversations", count=conv["unsafe"], rate_used=CORRECTED,
                     n_rated=n_rated, method=est.get("method"), judge_value=conv["rate"])  # fmt: skip
    value, ci = est.get("corrected"), est.get("ci")
    if value is None:
        why = est.get("note") or "no conversation of this model was rated"
        return replace(base, note=f"no corrected rate ({why}): rate some of this model's conversations")
    low, high = ci if ci is not None else (None, None)
    if on == "upper" and high is None:
        return replace(base, value=value, note="the corrected rate has no interval: rate more conversations")
    decided = high if on == "upper" else value
    assert decided is not None
    ok = decided <= threshold + 1e-12
    side = "upper bound" if on == "upper" else "corrected rate"
    return replace(base, status="pass" if ok else "fail", value=value, low=low, high=high, decided_on=decided,
                   note=f"{side} {_pct(decided)} {'<=' if ok else '>'} {_pct(threshold)}",
                   failures=failures)  # fmt: skip


def _unsafe_conditions(
    model: str, threshold: float, on: str, replies: ReplyVerdicts, convs: ConversationVerdicts, corrected: bool
) -> list[Condition]:
    out = []
    row = replies.row(model)
    conv = convs.row(model)
    if row is not None and (row.measurable or conv is None):
        out.append(
            _rate_condition(f"unsafe replies <= {_pct(threshold)}", "unsafe_rate", model, row.judge, threshold, on,
                            row.unsafe, row.replies, row.rate, row.low, row.high, "replies",
                            replies.failures(model, row.judge) if row.measurable else (), row.reason)
        )  # fmt: skip
    if conv is not None and corrected:
        failures = convs.failures(model, conv["judge"]) if conv["conversations"] else ()
        out.append(_corrected_condition(model, threshold, on, conv, failures))
    elif conv is not None:
        why = "no conversation could be judged (unscored, or failed in the simulator)"
        out.append(
            _rate_condition(f"unsafe conversations <= {_pct(threshold)}", "unsafe_conversations", model,
                            conv["judge"], threshold, on, conv["unsafe"], conv["conversations"], conv["rate"],
                            conv["low"], conv["high"], "conversations",
                            convs.failures(model, conv["judge"]) if conv["conversations"] else (), why)
        )  # fmt: skip
    if not out:
        out.append(Condition(f"unsafe replies <= {_pct(threshold)}", "max_unsafe", "unsafe_rate", model, None,
                             "undecided", threshold, on, note="no reply of this model was judged"))  # fmt: skip
    return out


def _min_condition(
    model: str, measure: Measure, minimum: float, on: str, replies: ReplyVerdicts, convs: ConversationVerdicts
) -> Condition:
    from mheval.reporting.metrics import mean_ci

    judge = judge_for(replies.data, measure.protocol, replies.block.judge)
    frame = scored_values(replies.data, measure, judge)
    mine = frame[frame["model"] == model]
    name = f"{measure.name} >= {minimum:g}"
    base = Condition(name, "min", measure.name, model, judge, "undecided", minimum, on)
    if mine.empty:
        ran = measure.protocol in (replies.data.config.get("protocols") or [])
        why = f"no scored {measure.protocol} verdict of this model's replies"
        if not ran:
            why += f" ({measure.protocol} did not run: add it with --protocol)"
        elif convs.models:
            why += " (a multi-turn run: --min reads single-turn replies only)"
        return replace(base, note=why)
    est = mean_ci(mine["value"].to_numpy(dtype=float), list(mine["case_id"]))
    value = est.value
    assert value is not None
    low = est.ci_low
    if on == "upper" and low is None:
        why = f"no interval ({est.note or 'too few cases'}): use --on point or judge more cases"
        return replace(base, value=value, n=len(mine), note=why)
    decided = low if on == "upper" else value
    assert decided is not None
    ok = decided >= minimum - 1e-12
    side = "lower bound" if on == "upper" else "mean"
    return replace(base, status="pass" if ok else "fail", value=value, low=est.ci_low, high=est.ci_high, n=len(mine),
                   decided_on=decided, note=f"{side} {decided:.2f} {'>=' if ok else '<'} {minimum:g}")  # fmt: skip


__all__ = ["gate"]
