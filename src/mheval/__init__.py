"""mheval: how safely and how well language models respond in mental-health and crisis conversations.

The public API (see docs/python-api.md):

- `evaluate(suite | cases, models=..., judges=..., protocols=..., out=..., **options) -> EvalResults`,
  and `evaluate_async` for async code;
- `open_run(path) -> EvalResults` reopens a run folder;
- `agree(labels, run=...)`: can the judge be trusted against human raters?
- `report(run)` writes the HTML report;
- `gate(run, max_unsafe=..., mins=..., baseline=...) -> GateResult`: pass or fail a run for CI;
- `summary(run) -> RunSummary`: the verdict, the headline numbers and the table `mheval summary` prints;
- `compare(run_a, run_b)`: B minus A per model and category, with intervals and paired tests;
  `compare_text(run_a, run_b, format=...)` gives its rows as the table, JSON or CSV that `mheval compare` prints;
- `export(run, table=..., format=..., output=...)`: one table of a run as JSONL, CSV, Parquet or chat messages;
- `transcript(run, scenario)`: one conversation of a multi-turn run with its verdicts, as text;
- `judge_transcripts(path, judges=...) -> EvalResults`: recorded conversations judged without calling a model;
- `validity(judge)`: the measured figures of a shipped judge, read from its figures file;
- `corrected(labels, run=...)`: headline figures corrected for the judge's errors by human ratings (PPI++).

The names load on first use, so `import mheval` stays quick for the command line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mheval.version import __version__

if TYPE_CHECKING:
    from mheval.api import (
        EvalResults,
        RunSummary,
        agree,
        compare,
        compare_text,
        corrected,
        evaluate,
        evaluate_async,
        export,
        gate,
        judge_transcripts,
        open_run,
        report,
        summary,
        transcript,
        validity,
    )
    from mheval.config import RunConfig
    from mheval.errors import InputError
    from mheval.records import Case, Judgment, Response, Turn
    from mheval.suites import Suite

_PUBLIC = {
    "evaluate": "mheval.api",
    "evaluate_async": "mheval.api",
    "open_run": "mheval.api",
    "agree": "mheval.api",
    "report": "mheval.api",
    "gate": "mheval.api",
    "corrected": "mheval.api",
    "validity": "mheval.api",
    "summary": "mheval.api",
    "compare": "mheval.api",
    "compare_text": "mheval.api",
    "export": "mheval.api",
    "transcript": "mheval.api",
    "judge_transcripts": "mheval.api",
    "EvalResults": "mheval.api",
    "RunSummary": "mheval.api",
    "RunConfig": "mheval.config",
    "InputError": "mheval.errors",
    "Case": "mheval.records",
    "Turn": "mheval.records",
    "Response": "mheval.records",
    "Judgment": "mheval.records",
    "Suite": "mheval.suites",
}

__all__ = [
    "Case",
    "EvalResults",
    "InputError",
    "Judgment",
    "Response",
    "RunConfig",
    "RunSummary",
    "Suite",
    "Turn",
    "__version__",
    "agree",
    "compare",
    "compare_text",
    "corrected",
    "evaluate",
    "evaluate_async",
    "export",
    "gate",
    "judge_transcripts",
    "open_run",
    "report",
    "summary",
    "transcript",
    "validity",
]


# `mheval.report` is only the function: the report's modules live in `mheval.reporting`, so importing them never
# replaces it (a subpackage named `report` would, as an import sets the package attribute of its name).
def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'mheval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
