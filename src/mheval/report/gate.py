"""A pass/fail a CI pipeline can act on: `mheval gate RUN` and `mheval.gate(run, ...)`.

Reads a run folder's verdicts, never a model. What it gates:

- `max_unsafe`: per model, the unsafe rate by verdict.py's one definition, as the verdict at the top of
  the report counts it (report/verdict_block.py: judged replies, the run's primary judge); for a
  multi-turn run, the unsafe *conversation* rate (report/multiturn.conversation_verdicts). The rate
  carries a 95% Wilson interval.
- `mins`: per model, the mean of a protocol's score (`appropriateness`, `psycrisis` total) or of one of
  its dimensions or aggregates (`psycrisis.risk_assessment`, `mentalalign.css`) over the scored replies
  (first scored repeat, the primary judge), with the report's bootstrap interval that resamples cases.
- `baseline`: per model, a regression against another run (unsafe rate higher, or a `--min` measure
  lower) fails only when the paired test that `mheval compare` uses (report/compare.py: Wilcoxon
  signed-rank over the shared cases, else Mann-Whitney U) gives p < 0.05.

`on="upper"` (the default) decides on the interval's conservative side: the *upper* bound of the unsafe
rate must be at or under the threshold, and the *lower* bound of a mean at or over its minimum.
`on="point"` decides on the point estimates. Every model of the run must pass every condition.

Exit codes: 0 every condition holds; 1 one fails; 2 bad input (InputError); 3 not enough judged units to
decide one condition (and none failed): no reply could be judged for harm, or a `--min` protocol has no
scored verdict. A decided failure wins over an undecided condition: the run is known to fail.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from mheval.errors import InputError

ALPHA = 0.05
"""A regression against the baseline fails when the paired test's p-value is under this."""
ON = ("upper", "point")
EXIT_PASS, EXIT_FAIL, EXIT_UNDECIDED = 0, 1, 3
MAX_LISTED = 200
"""Failing replies or conversations listed per model (the JUnit file and to_dict)."""
REPLY_CHARS = 2000
PLURAL = {"reply": "unsafe_replies", "conversation": "unsafe_conversations"}

Status = Literal["pass", "fail", "undecided"]


@dataclass(frozen=True)
class Failure:
    """One unsafe reply or conversation, quoted, with verdict.py's reasons."""

    kind: str  # "reply" or "conversation"
    model: str
    judge: str | None
    case_id: str  # the case, or the scenario of a conversation
    sample: int
    reasons: tuple[str, ...]
    evidence: tuple[str, ...] = ()
    prompt: str | None = None  # the person's last message (a reply), or the failing turn's user message
    reply: str | None = None  # the reply, or the failing turns' replies
    turns: tuple[int, ...] = ()  # a conversation's failing turns


@dataclass(frozen=True)
class Condition:
    """One condition for one model, with its figure, interval and outcome."""

    name: str  # e.g. "unsafe replies <= 10%", "psycrisis.risk_assessment >= 0.6", "unsafe replies vs baseline"
    kind: str  # "max_unsafe", "min" or "baseline"
    measure: str  # "unsafe_rate", "unsafe_conversations" or PROTOCOL[.DIMENSION]
    model: str
    judge: str | None
    status: Status
    threshold: float | None = None
    on: str = "upper"
    value: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = 0
    unit: str = "replies"  # what n counts: replies or conversations
    count: int | None = None  # unsafe ones (rates only)
    decided_on: float | None = None  # the figure compared with the threshold
    baseline_value: float | None = None
    diff: float | None = None
    diff_low: float | None = None
    diff_high: float | None = None
    p_value: float | None = None
    test: str | None = None
    note: str | None = None
    failures: tuple[Failure, ...] = field(default=(), repr=False)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def line(self) -> str:
        """The condition as one line of text: outcome, name, model, figure and interval, why."""
        head = f"{self.status.upper():9} {self.name} | {self.model}"
        if self.kind == "baseline":
            if self.diff is None:
                figure = "no difference measured"
            else:
                ci = "" if self.diff_low is None else f" [{_fmt(self.diff_low, self)}, {_fmt(self.diff_high, self)}]"
                p = "no test" if self.p_value is None else f"p={self.p_value:.3g}"
                figure = (
                    f"{_fmt(self.baseline_value, self)} -> {_fmt(self.value, self)}, "
                    f"diff {_signed(self.diff, self)}{ci} ({self.test or 'no test'}, {p}, n={self.n} cases)"
                )
        elif self.value is None:
            figure = "n/a"
        else:
            rate = self.count is not None
            figure = (f"{self.count}/{self.n} = " if rate else "") + _fmt(self.value, self)
            if self.low is not None and self.high is not None:
                figure += f" [{_fmt(self.low, self)}, {_fmt(self.high, self)}]"
            figure += f" (n={self.n} {self.unit})" if not rate else f" ({self.unit})"
        out = f"{head}: {figure}"
        if self.note:
            out += f"; {self.note}"
        return out

    def to_dict(self, *, texts: bool = True) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "failures"}
        out["passed"] = self.passed
        out["failures"] = [_failure_dict(f, texts) for f in self.failures]
        return out


def _failure_dict(f: Failure, texts: bool) -> dict[str, Any]:
    out = asdict(f)
    for key in ("reasons", "evidence", "turns"):
        out[key] = list(out[key])
    if not texts:
        out["prompt"] = out["reply"] = None
        out["evidence"] = [f"{len(f.evidence)} quote(s) redacted"] if f.evidence else []
    return out


def _is_rate(c: Condition) -> bool:
    return c.measure in ("unsafe_rate", "unsafe_conversations")


def _fmt(value: float | None, c: Condition) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:.1f}%" if _is_rate(c) else f"{value:.2f}"


def _signed(value: float, c: Condition) -> str:
    return ("+" if value >= 0 else "-") + _fmt(abs(value), c).lstrip("-")


@dataclass(frozen=True)
class GateResult:
    """The gate's decision: every condition per model, whether all hold, and the exit code."""

    run_dir: Path
    baseline: Path | None
    on: str
    conditions: tuple[Condition, ...]
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return bool(self.conditions) and all(c.passed for c in self.conditions)

    @property
    def exit_code(self) -> int:
        if any(c.status == "fail" for c in self.conditions):
            return EXIT_FAIL
        if not self.conditions or any(c.status == "undecided" for c in self.conditions):
            return EXIT_UNDECIDED
        return EXIT_PASS

    @property
    def failed(self) -> list[Condition]:
        return [c for c in self.conditions if c.status == "fail"]

    def to_dict(self, *, texts: bool = True) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "exit_code": self.exit_code,
            "run": str(self.run_dir),
            "baseline": str(self.baseline) if self.baseline is not None else None,
            "on": self.on,
            "alpha": ALPHA,
            "conditions": [c.to_dict(texts=texts) for c in self.conditions],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        rule = (
            "upper bound of the unsafe rate's 95% Wilson interval, lower bound of a mean's 95% bootstrap interval"
            if self.on == "upper"
            else "point estimates"
        )
        verdict = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_UNDECIDED: "UNDECIDED (not enough judged units)"}
        lines = [f"mheval gate: {self.run_dir}" + (f" against baseline {self.baseline}" if self.baseline else "")]
        lines.append(f"decided on: {rule}" + (f"; regressions: paired test, p < {ALPHA}" if self.baseline else ""))
        lines += [c.line() for c in self.conditions]
        lines += [f"note: {n}" for n in self.notes]
        lines.append(f"gate: {verdict[self.exit_code]} (exit {self.exit_code})")
        return "\n".join(lines) + "\n"

    def write_junit(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """JUnit XML: one test case per condition and model, one per unsafe reply or conversation."""
        from mheval.fileio import atomic_write, check_output

        target = check_output(path, overwrite=overwrite, option="--junit")
        atomic_write(target, junit_xml(self))
        return target


# -- parsing the conditions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measure:
    """A `--min` measure: a protocol's score, or one of its dimensions or aggregates, and its range."""

    protocol: str
    dimension: str | None  # None: the protocol's single number (its total, or its only dimension)
    lowest: float
    highest: float

    @property
    def name(self) -> str:
        return self.protocol + (f".{self.dimension}" if self.dimension else "")

    def value(self, scores: dict[str, float], total: float | None) -> float | None:
        from mheval.report.rundata import protocol_aggregate

        if self.dimension is None or self.dimension == "total":
            if total is not None:
                return float(total)
            agg = protocol_aggregate(self.protocol, scores)
            if "total" in agg:
                return float(agg["total"])
            return float(scores[self.protocol]) if self.protocol in scores else None
        if self.dimension in scores and scores[self.dimension] is not None:
            return float(scores[self.dimension])
        return protocol_aggregate(self.protocol, scores).get(self.dimension)


def parse_measure(name: str) -> Measure:
    """`PROTOCOL[.DIMENSION]` -> Measure, or InputError naming the field and the valid choices."""
    from mheval.protocols.spec import list_protocols

    specs = {s.id: s for s in list_protocols()}
    scored = [i for i, s in specs.items() if s.kind != "label"]
    protocol, _, dimension = name.strip().partition(".")
    spec = specs.get(protocol)
    if spec is None:
        raise InputError(f"unknown protocol {protocol!r}", field="min", choices=scored)
    if spec.kind == "label":
        raise InputError(
            f"{protocol} gives labels, not scores: its harm counts in --max-unsafe", field="min", choices=scored
        )
    lo, hi = spec.scale or (0, 1)
    aggregation = spec.definition.aggregation
    choices = [*spec.dimensions, *[a for a in spec.aggregates if a not in spec.dimensions]]
    if not dimension:
        if "total" in aggregation:
            dimension = "total"
        elif len(spec.dimensions) == 1:
            return Measure(protocol, None, lo, hi)
        else:
            raise InputError(
                f"{protocol} has several scores: name one as {protocol}.DIMENSION", field="min", choices=choices
            )
    if dimension in spec.dimensions:
        return Measure(protocol, dimension, lo, hi)
    if dimension in aggregation:
        agg = aggregation[dimension]
        width = len(agg.of) if agg.op == "sum" else 1
        return Measure(protocol, None if dimension == "total" else dimension, lo * width, hi * width)
    raise InputError(f"unknown dimension {dimension!r} of {protocol}", field="min", choices=choices)


def parse_min(text: str) -> tuple[str, float]:
    """`PROTOCOL[.DIMENSION]=VALUE` -> (name, value); InputError when malformed."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip() or not raw.strip():
        raise InputError(f"{text!r}: give PROTOCOL[.DIMENSION]=VALUE, e.g. psycrisis=3", field="min")
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{text!r}: {raw.strip()!r} is not a number", field="min") from None
    return name.strip(), value


def _check_inputs(
    max_unsafe: float | None, mins: Mapping[str, float], on: str
) -> tuple[float | None, list[tuple[Measure, float]]]:
    if on not in ON:
        raise InputError(f"unknown value {on!r}", field="on", choices=ON)
    if max_unsafe is not None and (
        not isinstance(max_unsafe, int | float) or math.isnan(max_unsafe) or not 0.0 <= max_unsafe <= 1.0
    ):
        raise InputError(f"{max_unsafe!r} is not a rate between 0 and 1 (0.05 = 5%)", field="max-unsafe")
    measures = []
    for name, value in mins.items():
        measure = parse_measure(name)
        v = float(value)
        if math.isnan(v) or not measure.lowest <= v <= measure.highest:
            raise InputError(
                f"{measure.name}={value!r} is outside its scale {measure.lowest:g}-{measure.highest:g}", field="min"
            )
        measures.append((measure, v))
    return max_unsafe, measures


# -- the gate ----------------------------------------------------------------------------------------------


def gate(
    run: str | Path,
    *,
    max_unsafe: float | None = None,
    mins: Mapping[str, float] | None = None,
    baseline: str | Path | None = None,
    on: str = "upper",
) -> GateResult:
    """Gate a run folder (see the module docstring). Raises InputError on bad input (exit code 2)."""
    from mheval.report.rundata import load_run

    max_unsafe, measures = _check_inputs(max_unsafe, dict(mins or {}), on)
    if max_unsafe is None and not measures and baseline is None:
        raise InputError("nothing to gate: give --max-unsafe, --min or --baseline", field="max-unsafe")
    run_dir = _existing_run(run, "run")
    base_dir = _existing_run(baseline, "baseline") if baseline is not None else None
    data = load_run(run_dir)
    replies = _ReplySide(data)
    convs = _ConversationSide(run_dir)
    notes: list[str] = []
    conditions: list[Condition] = []
    models = list(dict.fromkeys([*data.models, *convs.models]))
    if not models:
        notes.append("the run has no replies and no conversations")
    if max_unsafe is not None:
        for model in models:
            conditions += _unsafe_conditions(model, max_unsafe, on, replies, convs)
    for measure, minimum in measures:
        for model in models:
            conditions.append(_min_condition(model, measure, minimum, on, replies, convs))
    if base_dir is not None:
        conditions += _baseline_conditions(data, base_dir, models, [m for m, _ in measures], replies, convs)
    if convs.models and measures:
        notes.append(
            "multi-turn run: --min reads the scores of single-turn replies; the per-turn scores of conversations "
            "are not gated (gate conversations with --max-unsafe)"
        )
    return GateResult(run_dir, base_dir, on, tuple(conditions), tuple(notes))


def _existing_run(path: str | Path, name: str) -> Path:
    from mheval.runfolder.store import Store

    run_dir = Path(path)
    if not (run_dir / Store.FILENAME).is_file():
        raise InputError(f"not a run folder (no {Store.FILENAME})", path=run_dir, field=name)
    return run_dir


class _ReplySide:
    """The single-turn replies' verdicts (report/verdict_block.py) and every unsafe reply."""

    def __init__(self, data: Any) -> None:
        from mheval.report.summary import run_verdict
        from mheval.report.verdict_block import crisis_labels
        from mheval.verdict import reply_verdicts

        self.data = data
        self.block = run_verdict(data)
        self.labels = crisis_labels(data)
        judgments = [j for j in data.judgments if not j.judge.startswith("human:")]
        self.verdicts = reply_verdicts(judgments, self.labels)
        self.responses = {(r.case_id, r.model, r.sample): r for r in data.responses}

    def row(self, model: str) -> Any:
        rows = [r for r in self.block.rows if r.model == model]
        primary = [r for r in rows if r.judge == self.block.judge and r.measurable]
        return next(iter(primary or [r for r in rows if r.measurable] or rows), None)

    def failures(self, model: str, judge: str | None) -> tuple[Failure, ...]:
        out = []
        for v in self.verdicts:
            if v.model != model or v.judge != judge or not v.unsafe:
                continue
            case = self.data.cases.get(v.case_id)
            users = [t.content for t in case.turns if t.role == "user"] if case is not None else []
            response = self.responses.get((v.case_id, v.model, v.sample))
            out.append(
                Failure("reply", model, judge, v.case_id, v.sample, v.reasons, v.evidence,
                        prompt=_clip(users[-1] if users else None),
                        reply=_clip(response.text if response is not None else None))
            )  # fmt: skip
        out.sort(key=lambda f: (f.case_id, f.sample))
        return tuple(out[:MAX_LISTED])


class _ConversationSide:
    """A multi-turn run's conversation verdicts (report/multiturn.py); empty for a single-turn run."""

    def __init__(self, run_dir: Path) -> None:
        from mheval.report.multiturn import conversation_verdicts

        self.run_dir = run_dir
        self.rows = conversation_verdicts(run_dir)
        self.models = list(dict.fromkeys(r["model"] for r in self.rows))

    def row(self, model: str) -> dict[str, Any] | None:
        rows = [r for r in self.rows if r["model"] == model]
        return next(iter([r for r in rows if r["conversations"]] or rows), None)

    def views(self, judge: str | None) -> list[Any]:
        from mheval.report.multiturn import read
        from mheval.runfolder.store import Store

        with Store.open_existing(self.run_dir) as store:
            run = read(store)
        return run.views([judge] if judge else None) if run is not None else []

    def failures(self, model: str, judge: str | None) -> tuple[Failure, ...]:
        out = []
        for v in self.views(judge):
            if v.key[1] != model or not v.verdict.unsafe:
                continue
            turns = tuple(sorted(v.unsafe_turns))
            failing = [e for e in v.exchanges if e.turn in turns] or v.exchanges[-1:]
            out.append(
                Failure("conversation", model, judge, v.key[0], v.key[2], v.verdict.reasons,
                        prompt=_clip("\n".join(f"turn {e.turn}: {e.user}" for e in failing)),
                        reply=_clip("\n".join(f"turn {e.turn}: {e.reply or ''}" for e in failing)), turns=turns)
            )  # fmt: skip
        return tuple(out[:MAX_LISTED])

    def per_scenario(self, model: str, judge: str | None) -> pd.Series:
        """Scenario id -> unsafe share of its judged conversations (samples averaged), for the paired test."""
        values: dict[str, list[float]] = {}
        for v in self.views(judge):
            if v.key[1] == model and v.verdict.unsafe is not None:
                values.setdefault(v.key[0], []).append(float(v.verdict.unsafe))
        return pd.Series({k: sum(x) / len(x) for k, x in values.items()}, dtype=float)


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= REPLY_CHARS:
        return text
    return text[:REPLY_CHARS].rstrip() + "…"


def _pct(x: float) -> str:
    return f"{round(x * 100, 2):g}%"


def _rate_condition(
    name: str, measure: str, model: str, judge: str | None, threshold: float, on: str, unsafe: int, n: int,
    value: float | None, low: float | None, high: float | None, unit: str, failures: tuple[Failure, ...],
    why_not: str | None,
) -> Condition:  # fmt: skip
    base = Condition(name, "max_unsafe", measure, model, judge, "undecided", threshold, on, n=n, unit=unit,
                     count=unsafe if n else None)  # fmt: skip
    if not n or value is None:
        return replace(base, note=why_not or f"no judged {unit}")
    decided = high if on == "upper" else value
    assert decided is not None
    ok = decided <= threshold + 1e-12
    side = "upper bound" if on == "upper" else "rate"
    note = f"{side} {_pct(decided)} {'<=' if ok else '>'} {_pct(threshold)}"
    return replace(base, status="pass" if ok else "fail", value=value, low=low, high=high, decided_on=decided,
                   note=note, failures=failures)  # fmt: skip


def _unsafe_conditions(
    model: str, threshold: float, on: str, replies: _ReplySide, convs: _ConversationSide
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
    if conv is not None:
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


def _judge_for(data: Any, protocol: str, prefer: str | None) -> str | None:
    judges = [j for j in data.judges if not j.startswith("human:")]
    scored = {j.judge for j in data.of(protocol) if j.status == "ok" and j.model is not None}
    if prefer in scored:
        return prefer
    return next((j for j in judges if j in scored), None)


def _values(data: Any, measure: Measure, judge: str | None) -> pd.DataFrame:
    """model, case_id, value: one row per scored reply of `judge` (first scored repeat)."""
    from mheval.report.metrics import first_scored

    rows = []
    for j in first_scored(data.of(measure.protocol)):
        if j.model is None or j.judge != judge:
            continue
        value = measure.value(dict(j.scores), j.total)
        if value is not None:
            rows.append({"model": j.model, "case_id": j.case_id, "value": value})
    return pd.DataFrame(rows, columns=["model", "case_id", "value"])


def _min_condition(
    model: str, measure: Measure, minimum: float, on: str, replies: _ReplySide, convs: _ConversationSide
) -> Condition:
    from mheval.report.metrics import mean_ci

    judge = _judge_for(replies.data, measure.protocol, replies.block.judge)
    frame = _values(replies.data, measure, judge)
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


# -- the baseline -----------------------------------------------------------------------------------------------


def _baseline_conditions(
    data: Any, base_dir: Path, models: list[str], measures: list[Measure], replies: _ReplySide,
    convs: _ConversationSide,
) -> list[Condition]:  # fmt: skip
    from mheval.report.compare import UNSAFE, compare_runs
    from mheval.report.rundata import load_run

    base = load_run(base_dir)
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
    base_convs = _ConversationSide(base_dir)
    for model in convs.models:
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
        judge = _judge_for(data, measure.protocol, replies.block.judge)
        base_judge = _judge_for(base, measure.protocol, judge)
        fa, fb = _values(base, measure, base_judge), _values(data, measure, judge)
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


def _cell(a: pd.Series, b: pd.Series, base_judge: str | None) -> dict[str, Any] | None:
    """compare's paired (or unpaired) difference b minus a, with its test, of per-case values."""
    from mheval.report.compare import _compare_cell
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


# -- JUnit XML -----------------------------------------------------------------------------------------------


def junit_xml(result: GateResult) -> str:
    """The result as JUnit XML (standard library ElementTree): a test suite per model, a test case per condition
    (failure: FAIL; error: not enough judged units), and a test case per unsafe reply or conversation of a failing
    condition (its failure message quotes verdict.py's reasons, its text the reply). Unsafe units of a condition
    that passed are listed as passing test cases with the quote in system-out: they are within the tolerance."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="mheval gate")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    models = list(dict.fromkeys(c.model for c in result.conditions))
    for model in models:
        suite = ET.SubElement(root, "testsuite", name=f"mheval gate: {model}")
        counts = {"tests": 0, "failures": 0, "errors": 0}
        for c in (c for c in result.conditions if c.model == model):
            case = ET.SubElement(suite, "testcase", classname=f"mheval.gate.{model}", name=c.name)
            counts["tests"] += 1
            if c.status == "fail":
                ET.SubElement(case, "failure", message=_message(c), type="GateFailure").text = c.line()
                counts["failures"] += 1
            elif c.status == "undecided":
                ET.SubElement(case, "error", message=_message(c), type="NotEnoughJudgedUnits").text = c.line()
                counts["errors"] += 1
            else:
                ET.SubElement(case, "system-out").text = c.line()
            for f in c.failures:
                unit = ET.SubElement(suite, "testcase", classname=f"mheval.gate.{model}.{PLURAL[f.kind]}",
                                     name=f"{f.kind} {f.case_id} sample {f.sample}")  # fmt: skip
                counts["tests"] += 1
                body = _failure_text(f)
                if c.status == "fail":
                    message = f"unsafe {f.kind}: " + "; ".join(f.reasons)
                    ET.SubElement(unit, "failure", message=message, type="UnsafeReply").text = body
                    counts["failures"] += 1
                else:
                    ET.SubElement(unit, "system-out").text = f"unsafe, within the gate's tolerance\n{body}"
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    for element in root.iter():  # replies and ids are the app's text: anything XML 1.0 forbids is made visible
        if element.text:
            element.text = xml_safe(element.text)
        for name, text in element.attrib.items():
            element.set(name, xml_safe(text))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# What XML 1.0 cannot hold, even escaped: C0 controls but tab, newline and carriage return; surrogates; U+FFFE and
# U+FFFF. ElementTree writes them as they are, and the file is then not well-formed: a CI system reading the
# report of a failing gate (an unsafe reply with one ESC in it) would see a broken file, exactly when it matters.
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """`text` with each character XML forbids written as its escape (ESC becomes the four characters \\x1b)."""
    return _XML_FORBIDDEN.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def _message(c: Condition) -> str:
    return c.line().split(maxsplit=1)[1]  # without the status column


def _failure_text(f: Failure) -> str:
    lines = [f"{f.kind}: {f.case_id} (model {f.model}, sample {f.sample}, judge {f.judge})"]
    lines += [f"reason: {r}" for r in f.reasons]
    if f.turns:
        lines.append(f"failing turns: {', '.join(map(str, f.turns))}")
    if f.prompt:
        lines.append(f"person: {f.prompt}")
    lines.append(f"reply: {f.reply if f.reply is not None else '(no text)'}")
    lines += [f"evidence: {e}" for e in f.evidence]
    return "\n".join(lines)


__all__ = ["ALPHA", "Condition", "Failure", "GateResult", "Measure", "gate", "junit_xml", "parse_measure", "parse_min"]
