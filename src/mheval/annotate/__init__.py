"""Blind human rating of a run's units (`mheval annotate`): studies, the rating server, status and export.

study = mheval.annotate.init_study("runs/x", "psycrisis", raters=["alice", "bob"], overlap=2)
mheval.annotate.serve("runs/x")                    # prints one secret link per rater
mheval.annotate.study_status("runs/x")             # progress and live human-human agreement
mheval.annotate.export_ratings("runs/x", "judgments")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mheval.annotate.export import export_ratings, human_judgments, human_labels
from mheval.annotate.status import StudyStatus, study_status
from mheval.annotate.study import Study, list_studies


def init_study(run_dir: str | Path, protocol: str, raters: list[str], **options: Any) -> Study:
    """Create a study of `protocol` over a finished run (see Study.create for the options)."""
    return Study.create(run_dir, protocol, raters, **options)


def serve(run_dir: str | Path, study: str | None = None, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve the study's rating pages until interrupted (annotate/server.py)."""
    from mheval.annotate.server import serve_study

    serve_study(Path(run_dir), study=study, host=host, port=port)


__all__ = ["Study", "StudyStatus", "export_ratings", "human_judgments", "human_labels", "init_study",
           "list_studies", "serve", "study_status"]  # fmt: skip
