"""Reports people read: the HTML report, its tables, terminal summaries and run comparisons.

`load_run(run_dir)` reads a run folder once into a `RunData`, which everything here takes (a run folder is
read for you where one is given): `write_report` writes `report.html` and `tables/`; `summary_text` is the
terminal summary; `compare_runs(a, b)` the differences between two runs. Imported lazily, so `import
mheval.reporting` stays cheap for commands that do not report.

The package is `reporting`, not `report`: `mheval.report` is the API function (api.report), and a subpackage
of that name would replace it on the package root whenever one of its modules is imported.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "load_run": "mheval.reporting.rundata",
    "RunData": "mheval.reporting.rundata",
    "write_report": "mheval.reporting.html",
    "render_report": "mheval.reporting.html",
    "compare_runs": "mheval.reporting.compare",
    "summary_text": "mheval.reporting.summary",
    "format_comparison": "mheval.reporting.summary",
    "report_tables": "mheval.reporting.tables",
    "summary_frame": "mheval.reporting.tables",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'mheval.reporting' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
