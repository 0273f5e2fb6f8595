"""Judgments to compare with human labels: from a run folder, or from an exported JSONL/CSV file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mheval.errors import InputError
from mheval.labels import CONVERSATION_FLOW


def load_judgments(
    *, run_dir: str | Path | None = None, path: str | Path | None = None, protocol: str | None = None
) -> pd.DataFrame | None:
    """The judgments table (columns of `mheval export --table judgments`), or None when neither is given.

    From a run folder, the judgments are those the run's injection policy counts (under
    `on_injection: exclude` the ones flagged injection_suspected are left out, as in every aggregate); asked for
    conversation-flow, they also hold each judge's verdict on each conversation (score ``unsafe``:
    analysis/conversation_verdicts.py), which raters answer on the same form.
    """
    if run_dir is not None and path is not None:
        raise InputError("give either --run or --judgments, not both", field="judgments")
    if run_dir is not None:
        from mheval.runfolder.export import table_frame
        from mheval.runfolder.store import Store

        with Store.open_existing(run_dir) as store:
            frame = table_frame(store, "judgments", counted=True)
            if protocol == CONVERSATION_FLOW:
                from mheval.analysis.conversation_verdicts import verdict_frame

                verdicts = verdict_frame(store)
                frame = pd.concat([frame, verdicts], ignore_index=True) if not frame.empty else verdicts
    elif path is not None:
        p = Path(path)
        if not p.is_file():
            raise InputError("file not found", path=p)
        if p.suffix.lower() == ".csv":
            frame = pd.read_csv(p)
        elif p.suffix.lower() in (".jsonl", ".ndjson"):
            try:
                frame = pd.read_json(p, lines=True)
            except ValueError as exc:
                raise InputError(f"not valid JSONL ({exc})", path=p) from None
        else:
            raise InputError(f"unknown file type {p.suffix!r}", path=p, choices=[".jsonl", ".csv"])
        missing = {"case_id", "judge", "status"} - set(frame.columns)
        if missing:
            raise InputError("not a judgments export", path=p, field=sorted(missing)[0])
    else:
        return None
    if protocol is not None and not frame.empty:
        frame = frame[frame["protocol"] == protocol]
    return frame
