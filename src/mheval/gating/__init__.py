"""The CI gate: a finished run's verdicts as pass, fail or undecided, and the exit code a pipeline acts on.

`mheval gate RUN` and `mheval.gate(run, ...)` call `gate` here. It reads a run folder (the verdicts the report
shows, through `reporting/`), never a model, and prints nothing. The modules, one job each:

- `decide`: `gate` itself, the unsafe-rate and `--min` conditions per model;
- `measures`: what `--min` names (`PROTOCOL[.DIMENSION]=VALUE`) and the argument checks;
- `verdicts`: the reply and conversation verdicts read from the run, and the unsafe units listed;
- `baseline`: regressions against another run, by the paired test `mheval compare` uses;
- `result`: `GateResult`, `Condition`, `Failure` and their forms (text, dict, JUnit XML).

See docs/gate.md.
"""

from __future__ import annotations

from mheval.gating.decide import gate
from mheval.gating.measures import ON, Measure, parse_measure, parse_min
from mheval.gating.result import (
    ALPHA,
    EXIT_FAIL,
    EXIT_PASS,
    EXIT_UNDECIDED,
    Condition,
    Failure,
    GateResult,
    junit_xml,
    xml_safe,
)
from mheval.gating.verdicts import MAX_LISTED, REPLY_CHARS

__all__ = [
    "ALPHA",
    "EXIT_FAIL",
    "EXIT_PASS",
    "EXIT_UNDECIDED",
    "MAX_LISTED",
    "ON",
    "REPLY_CHARS",
    "Condition",
    "Failure",
    "GateResult",
    "Measure",
    "gate",
    "junit_xml",
    "parse_measure",
    "parse_min",
    "xml_safe",
]
