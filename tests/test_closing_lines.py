"""What a run says when its stages end, made by the API (`mheval.api.closing_lines`, `problem_lines`) and printed
as it is by `mheval run` and the stage commands. A Python function as the target and only the generate stage: no
network, no judge."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import mheval
from cli_inprocess import mheval as cli
from mheval import api

CASES = [
    {"id": "a", "text": "I can't sleep and everything feels heavy."},
    {"id": "b", "text": "Work has been a lot lately and I keep snapping at people."},
]
BOT = """
def reply(messages):
    return {"content": "That sounds hard. Are you safe right now?",
            "usage": {"prompt_tokens": 5, "completion_tokens": 8}}

def down(messages):
    raise RuntimeError("the app is down")
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "bot.py").write_text(BOT, encoding="utf-8")
    (tmp_path / "cases.jsonl").write_text(
        "".join(f'{{"id": "{c["id"]}", "text": "{c["text"]}"}}\n' for c in CASES), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("bot", None)


def _generate(target: str, out: str, **options: object) -> api.EvalResults:
    return mheval.evaluate(cases=CASES, models=[f"python:bot.py:{target}"], stages=["generate"], out=out, **options)


def test_a_finished_run_says_what_it_did_and_has_no_problems(folder):
    result = _generate("reply", "run")
    (done,) = api.closing_lines(result)
    assert done.startswith("done in ") and "2 responses" in done
    assert done.endswith("2 model calls (0 answered from cache), 26 tokens (prompt + completion)")
    assert api.problem_lines(result) == []


def test_changed_sampling_says_which_units_were_redone(folder):
    _generate("reply", "run")
    again = _generate("reply", "run", max_tokens=100)
    assert api.closing_lines(again)[-1] == "redone because their inputs changed: 2 (model or sampling parameters)"
    unchanged = _generate("reply", "run", max_tokens=100)
    assert not any(line.startswith("redone") for line in api.closing_lines(unchanged))


def test_units_failed_at_the_provider_say_how_to_retry(folder):
    result = _generate("down", "broken")
    assert api.problem_lines(result) == [
        "2 unit(s) failed at the provider and are not scored; run the same command again "
        "(or `mheval run --out broken`) to retry them"
    ]


def test_the_command_prints_the_same_lines_and_exits_3_on_a_problem(folder):
    args = ["generate", "--suite", "jsonl:cases.jsonl", "--out", "run"]
    quiet = {"MHEVAL_QUIET": "1"}
    first = cli(*args, "--model", "python:bot.py:reply", env=quiet)
    assert first.exit_code == 0, first.output
    redone = cli(*args, "--model", "python:bot.py:reply", "--max-tokens", "100", env=quiet)
    assert redone.exit_code == 0, redone.output
    assert "redone because their inputs changed: 2 (model or sampling parameters)" in redone.stderr.splitlines()
    failed = cli(*args[:-1], "broken", "--model", "python:bot.py:down", env=quiet)
    assert failed.exit_code == 3
    assert failed.stderr.splitlines()[-1] == (
        "2 unit(s) failed at the provider and are not scored; run the same command again "
        "(or `mheval run --out broken`) to retry them"
    )
