"""The offline judge's identity covers everything that decides its judgments, so a resumed run never reuses
a judgment made with other tables: its own folder, the crisis-line table and the text tables of textscan.py
(traditional-to-simplified folding the cue lists are matched through)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mheval.config import RunConfig
from mheval.engine import identity


@pytest.mark.parametrize("changed", ["textscan.py", "resources/crisis_lines.yaml", "judges/offline/psycrisis.yaml"])
def test_changing_a_file_the_offline_judge_reads_changes_its_identity(monkeypatch, changed: str) -> None:
    before = identity.judge_digest("offline", RunConfig())
    real = identity._file_digest

    def edited(path: Path) -> str:
        return "edited" if path.as_posix().endswith("mheval/" + changed) else real(path)

    monkeypatch.setattr(identity, "_file_digest", edited)
    assert identity.judge_digest("offline", RunConfig()) != before
    assert identity.judge_digest("offline:fast", RunConfig()) != identity.judge_digest("offline", RunConfig())


def test_an_unrelated_file_leaves_it_alone(monkeypatch) -> None:
    before = identity.judge_digest("offline", RunConfig())
    real = identity._file_digest
    monkeypatch.setattr(identity, "_file_digest", lambda p: "x" if p.name == "cli.py" else real(p))
    assert identity.judge_digest("offline", RunConfig()) == before
