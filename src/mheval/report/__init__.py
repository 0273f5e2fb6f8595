"""Reports people read: the HTML report, its tables, terminal summaries and run comparisons.

`write_report(run_dir)` writes `report.html` and `tables/`; `summary_text(run_dir)` is the terminal
summary; `compare_runs(a, b)` the differences between two runs. Imported lazily, so `import
mheval.report` stays cheap for commands that do not report.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "write_report": "mheval.report.html",
    "render_report": "mheval.report.html",
    "compare_runs": "mheval.report.compare",
    "summary_text": "mheval.report.summary",
    "format_comparison": "mheval.report.summary",
    "report_tables": "mheval.report.tables",
    "summary_frame": "mheval.report.tables",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'mheval.report' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
