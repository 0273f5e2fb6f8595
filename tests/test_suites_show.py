"""`mheval suites show`: cases and scenarios open the same way (name and description, size, a line per field
counting its values, commonest first), then the content warning, then the first cases or scenarios."""

from __future__ import annotations

import json
from collections import Counter

from cli_inprocess import mheval

CASES = [
    {"id": "en-1", "text": "I have been feeling low since I lost my job.", "language": "en", "locale": "GB",
     "crisis_label": "no_crisis"},
    {"id": "en-2", "text": "Exams are next week and I can't sleep.", "language": "en", "locale": "US",
     "crisis_label": "anxiety_crisis"},
    {"id": "zh-1", "text": "最近压力很大，睡不着。", "language": "zh", "locale": "CN",
     "crisis_label": "anxiety_crisis"},
]  # fmt: skip


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def test_a_case_file_shows_its_tallies_then_the_warning_then_the_cases(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CASES), encoding="utf-8")
    shown = mheval("suites", "show", f"jsonl:{path}", "--limit", "1", env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    lines = _lines(shown.stdout)
    assert lines[1] == f"{len(CASES)} cases, 0 responses"
    labels = Counter(c["crisis_label"] for c in CASES).most_common()
    assert "  crisis_label: " + ", ".join(f"{k} {v}" for k, v in labels) in lines
    assert "  language: en 2, zh 1" in lines
    assert "  turns: single 3" in lines
    warning = next(i for i, line in enumerate(lines) if line.startswith("Content warning"))
    assert warning > lines.index("  turns: single 3")
    assert any(line.startswith("en-1 ") for line in lines[warning:])
    assert not any(line.startswith("zh-1 ") for line in lines)  # --limit 1


def test_a_scenario_suite_shows_its_tallies_then_the_warning_then_the_table():
    from mheval.suites.dialogues import load_dialogue_suite

    scenarios = load_dialogue_suite("crisis-dialogues")
    shown = mheval("suites", "show", "crisis-dialogues", "--limit", "2", env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    lines = _lines(shown.stdout)
    assert lines[0].startswith("crisis-dialogues: ")
    assert lines[1] == f"{len(scenarios)} scenarios, {sum(len(s.beats) for s in scenarios)} beats"
    families = Counter(s.family for s in scenarios).most_common()
    assert lines[3] == "  family: " + ", ".join(f"{k} {v}" for k, v in families)
    assert lines[6].startswith("Content warning")
    rows = [line for line in lines[7:] if line.startswith("│")]
    assert len(rows) == 2 and scenarios[0].id in rows[0]
