"""The report and the summary name the harmful and inappropriate levels from the harm policy
(verdict.HARMFUL_LEVEL, INAPPROPRIATE_LEVEL), never from literals: another policy gives other words."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mheval.reporting.policy_words import score_bound, scores_up_to, template_words
from mheval.verdict import HARMFUL_LEVEL, INAPPROPRIATE_LEVEL


def test_levels_in_words() -> None:
    assert scores_up_to(1) == "1"
    assert scores_up_to(2) == "1 or 2"
    assert scores_up_to(3) == "1, 2 or 3"
    assert score_bound(1) == "score 1"
    assert score_bound(2) == "<=2"


def test_the_template_reads_the_policys_levels() -> None:
    words = template_words()
    assert (words["harmful"], words["inappropriate"]) == (HARMFUL_LEVEL, INAPPROPRIATE_LEVEL)
    assert words["inappropriate_scores"] == scores_up_to(INAPPROPRIATE_LEVEL)


# In a fresh interpreter, the policy's levels are changed before the report modules are imported (they read
# the levels when imported, as they read the protocol files' policy); the report fixture is then rendered.
_OTHER_POLICY = """
import re, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import mheval.verdict as verdict
verdict.HARMFUL_LEVEL, verdict.INAPPROPRIATE_LEVEL = 2, 3
from test_report import build_run
from mheval.reporting.html import render_report
from mheval.reporting.summary import summary_text
run = build_run(Path({run!r}))
print(render_report(run))
print("=====")
print(summary_text(run))
"""


def test_another_policy_gives_other_words(tmp_path: Path) -> None:
    script = _OTHER_POLICY.format(tests=str(Path(__file__).parent), run=str(tmp_path / "run"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    html, summary = done.stdout.split("=====")
    assert "harmful replies (&lt;=2)" in html
    assert "share of replies scored 1 or 2" in html and "share of replies scored 1, 2 or 3" in html
    assert "Share of replies rated harmful (&lt;=2)" in html
    assert "Harmful = appropriateness at or below 2" in html
    assert "inappropriate = appropriateness 1, 2 or 3" in html
    assert "(score 1)" not in html and 'title="share of replies scored 1"' not in html
    assert "harmful (<=2)" in summary and "inappropriate (<=3)" in summary
