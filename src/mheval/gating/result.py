"""The gate's decision and the forms it is read in: one line a condition, a dict (JSON), JUnit XML for CI.

`Failure` is one unsafe reply or conversation, `Condition` one condition for one model, `GateResult` them
all with the exit code. Nothing here reads a run: `decide.gate` builds these.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

ALPHA = 0.05
"""A regression against the baseline fails when the paired test's p-value is under this."""
EXIT_PASS, EXIT_FAIL, EXIT_UNDECIDED = 0, 1, 3
PLURAL = {"reply": "unsafe_replies", "conversation": "unsafe_conversations"}
CORRECTED, JUDGE = "corrected", "judge"
"""Condition.rate_used: the unsafe rate corrected by people's ratings, or the judge's own count."""
RATE_MEASURES = ("unsafe_rate", "unsafe_conversations", "unsafe_conversations_corrected")

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
    # Which unsafe rate decided the condition: "judge" (the judge's own count, Wilson interval) or "corrected"
    # (corrected for the judge's errors by people's ratings, PPI++ interval); None for a --min condition.
    rate_used: str | None = None
    n_rated: int | None = None  # corrected: the human-rated conversations the estimate rests on
    method: str | None = None  # corrected: the estimator ("ppi++", "stratified ppi++", ...)
    judge_value: float | None = None  # corrected: the judge's own rate, shown beside it

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
                    f"diff {_signed(self.diff, self)}{ci} ({self.test or 'no test'}, {p}, n={self.n} "
                    f"{self.unit if self.rate_used == CORRECTED else 'cases'})"
                )
        elif self.rate_used == CORRECTED:
            figure = _fmt(self.value, self)
            if self.low is not None and self.high is not None:
                figure += f" [{_fmt(self.low, self)}, {_fmt(self.high, self)}]"
            figure += (
                f" corrected for the judge's errors with {self.n_rated or 0} human-rated {self.unit}"
                f" ({self.method or 'PPI++'}); the judge alone: {self.count}/{self.n} = {_fmt(self.judge_value, self)}"
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
    return c.measure in RATE_MEASURES


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
    corrected: bool = False  # the unsafe-conversation rate was decided corrected by people's ratings

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
            "corrected": self.corrected,
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
        if self.corrected:
            rule += "; unsafe conversations: the rate corrected for the judge's errors by people's ratings" + (
                " (upper bound of its 95% PPI++ interval)" if self.on == "upper" else ""
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


__all__ = [
    "ALPHA",
    "CORRECTED",
    "EXIT_FAIL",
    "EXIT_PASS",
    "EXIT_UNDECIDED",
    "JUDGE",
    "Condition",
    "Failure",
    "GateResult",
    "Status",
    "junit_xml",
    "xml_safe",
]
