"""The numbers a run prints while it runs and when it ends have one meaning each, labelled: model calls are
the calls this run made (a Python target's too, though it reports no tokens), tokens are prompt + completion of
those calls, and the embedded target's speed counts completion tokens and says so."""

from __future__ import annotations

import io
import re

import mheval
from cli_inprocess import mheval as cli
from mheval.models.local import GenerationStats
from mheval.progress import PlainProgress

CASES = [{"id": f"c{i}", "text": "I feel low.", "language": "en"} for i in range(4)]


def supportive(messages):
    return {"content": "I'm here with you. Are you safe right now?",
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}}  # fmt: skip


def silent(messages):
    return "I'm here with you."  # no usage: a call all the same


def _progress(fn, tmp_path) -> tuple[str, mheval.EvalResults]:
    stream = io.StringIO()
    with PlainProgress(stream, every_s=0) as progress:
        result = mheval.evaluate(cases=CASES, models=[fn], judges=["offline:fast"], protocols=["psycrisis"],
                                 out=tmp_path / fn.__name__, progress=progress)  # fmt: skip
    return stream.getvalue(), result


def test_progress_counts_the_calls_and_tokens_the_closing_line_counts(tmp_path):
    text, result = _progress(supportive, tmp_path)
    last = [ln for ln in text.splitlines() if ln.startswith("progress: generate ")][-1]
    assert result.model_calls == len(CASES)
    assert f"{len(CASES)} model calls" in last and f"{15 * len(CASES)} tokens (prompt + completion)" in last, last
    assert result.usage.prompt_tokens + result.usage.completion_tokens == 15 * len(CASES)


def test_a_python_target_without_usage_still_shows_its_calls(tmp_path):
    text, result = _progress(silent, tmp_path)
    last = [ln for ln in text.splitlines() if ln.startswith("progress: generate ")][-1]
    assert result.model_calls == len(CASES) and f"{len(CASES)} model calls" in last, last


def test_the_closing_line_labels_its_numbers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.jsonl").write_text("".join(
        f'{{"id": "c{i}", "text": "I feel low."}}\n' for i in range(3)), encoding="utf-8")  # fmt: skip
    (tmp_path / "bot.py").write_text(
        "def reply(messages):\n    return {'content': 'Are you safe?', "
        "'usage': {'prompt_tokens': 7, 'completion_tokens': 3}}\n", encoding="utf-8")  # fmt: skip
    done = cli("run", "--suite", "jsonl:cases.jsonl", "--model", "python:bot.py:reply", "--judge", "offline:fast",
               "--protocol", "psycrisis", "--out", "run", env={"MHEVAL_QUIET": "1"})  # fmt: skip
    assert done.exit_code == 0, done.output
    closing = next(ln for ln in done.stderr.splitlines() if ln.startswith("done in "))
    assert re.search(r"; 3 model calls \(0 answered from cache\), 30 tokens \(prompt \+ completion\)$", closing), (
        closing
    )


def test_the_generation_speed_says_its_tokens_are_completion_tokens():
    stats = GenerationStats("local/smollm2", slots=4, calls=10, completion_tokens=1500, busy_s=12.5)
    assert stats.line() == (
        "local/smollm2: generation took 12.5 s at 120.0 completion tokens/s (10 calls, 1,500 completion tokens, "
        "4 slots)"
    )
