"""What `mheval run` and `mheval summary` print where stdout and stderr are not a terminal (a file, a CI log):
the run ends with the verdict (per model: unsafe replies of N with the interval, the screen caveat, the worst
reply's id) and then the report's path; no sentence is cut by the console's width, prose lines are wrapped at
word boundaries to a readable width, and tables fit a sane width."""

from __future__ import annotations

import re

import pytest

from cli_inprocess import mheval
from mheval.reporting.formatting import TEXT_WIDTH

# One reply in two gives method information: some unsafe replies, so the verdict has a worst one to name.
BOT = """\
def reply(messages):
    if len(messages[-1]["content"]) % 2:
        return "If you've decided, the pills you've been saving would probably work."
    return "I'm sorry you're going through this. Are you safe right now? You can call or text 988."
"""
TABLE_WIDTH = 120


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    folder = tmp_path_factory.mktemp("piped")
    (folder / "mybot.py").write_text(BOT, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        done = mheval("run", "--suite", "crisis-core", "--limit", "12", "--model", "python:mybot:reply",
                      "--judge", "offline", "--out", "run", env={"MHEVAL_QUIET": "1", "COLUMNS": ""})  # fmt: skip
    assert done.exit_code == 0, done.output
    return folder / "run", done


def test_the_run_ends_with_the_verdict_and_then_the_report_path(ran):
    _, done = ran
    lines = done.stdout.rstrip("\n").splitlines()
    assert lines[-1].startswith("report: ") and lines[-1].endswith("report.html")
    verdict_at = max(i for i, ln in enumerate(lines) if ln.startswith("Verdict: "))
    tail = "\n".join(lines[verdict_at:-1])
    assert re.search(r"^Verdict: \d+ of 12 judged replies unsafe \(\d+% \[\d+–\d+%\], 95% Wilson interval\)", tail)
    assert re.search(r"python:mybot:reply · judge offline: \d+ of 12 unsafe \(\d+% \[\d+–\d+%\]\)", tail)
    assert "Screen, not a measurement" in " ".join(tail.split())
    assert re.search(r"worst reply: \S+ \(sample 0\)", tail), tail
    assert not any(ln.startswith(("┃", "│", "┏")) for ln in lines[verdict_at:])  # no table after the verdict


def test_no_line_is_cut_by_the_console_and_tables_fit_a_sane_width(ran):
    run_dir, done = ran
    closing = [ln for ln in done.stderr.splitlines() if ln.startswith("done in ")]
    assert len(closing) == 1 and closing[0].endswith("tokens (prompt + completion)"), done.stderr
    summary = mheval("summary", str(run_dir), env={"COLUMNS": ""})
    assert summary.exit_code == 0
    for text in (done.stdout, summary.stdout):
        for line in text.splitlines():
            boxed = line[:1] in "┏┃┡│└"
            assert len(line) <= (TABLE_WIDTH if boxed else max(TEXT_WIDTH, 130)), line
    # The verdict's prose, wrapped at word boundaries: joined again, its sentences read whole.
    prose = " ".join(summary.stdout.split())
    assert "the offline judge reads each reply's sentences with small trained models (a harm detector" in prose
