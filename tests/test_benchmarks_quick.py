"""Each benchmark's --quick mode runs end to end and prints the JSON it promises.

These check shape and sanity (every judgment made and stored, zero calls on replay, figures positive),
not timing thresholds: the figures themselves are measured with the full benchmarks, not in CI.
The three benchmarks run at once, as subprocesses, to keep this file short.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(BENCHMARKS / f"{name}.py"), "--quick"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=BENCHMARKS,
        )
        for name in ("throughput", "memory", "replay")
    }
    out: dict[str, dict[str, Any]] = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"{name} --quick failed:\n{stderr[-2000:]}"
        out[name] = json.loads(stdout)
    return out


def _positive(x: object) -> bool:
    return isinstance(x, int | float) and x > 0 and math.isfinite(x)


def test_throughput_quick(results: dict[str, dict[str, Any]]) -> None:
    data = results["throughput"]
    assert data["benchmark"] == "throughput" and data["quick"] is True
    assert {"machine", "points", "best_per_s_at_0ms", "inspect", "seconds"} <= data.keys()
    mheval = [p for p in data["points"] if p["harness"] == "mheval"]
    assert {p["latency_s"] for p in mheval} == {0.0, 0.2}
    for p in mheval:
        assert "error" not in p, p
        # The full path ran: every judgment was made by one call, stored, and parsed as ok.
        assert p["ok"] == p["judgments"] == p["model_calls"] == p["server_calls"], p
        assert _positive(p["judgments_per_s"]) and _positive(p["stage_judgments_per_s"])
        assert p["server_max_in_flight"] <= p["concurrency"]
        if p["latency_s"] > 0:
            assert 0 < p["efficiency"] <= 1.05 and 0 < p["stage_efficiency"] <= 1.1, p
    assert _positive(data["best_per_s_at_0ms"])
    inspect = data["inspect"]
    assert isinstance(inspect["available"], bool)
    if inspect["available"]:
        assert _positive(inspect["ratio_mheval_over_inspect"])
        for p in inspect["points"]:
            assert p["ok"] == p["judgments"] == p["server_calls"], p
    else:
        assert isinstance(inspect["reason"], str) and inspect["reason"]


def test_memory_quick(results: dict[str, dict[str, Any]]) -> None:
    data = results["memory"]
    assert data["benchmark"] == "memory" and data["cases"] == 500
    assert data["judgments"] == 500 and data["model_calls"] == 500
    assert 0 < data["baseline_rss_mb"] <= data["peak_rss_mb"] < 4096
    assert data["target"] == {"peak_rss_mb_below": 1024}


def test_replay_quick(results: dict[str, dict[str, Any]]) -> None:
    data = results["replay"]
    assert data["benchmark"] == "replay" and data["judgments"] == 300
    first, second = data["first_run"], data["second_run"]
    assert first["model_calls"] == first["server_calls"] == 300
    assert second["model_calls"] == 0 and second["server_calls"] == 0, "a finished run makes no call again"
    assert second["judgments"] == first["judgments"] == 300
    assert _positive(second["seconds"]) and second["process_seconds"] >= second["seconds"]
    assert data["seconds"] == second["seconds"] and data["model_calls"] == 0


def test_transcripts_scale_quick() -> None:
    """The recorded-conversation benchmark: a log written, imported whole, and a slice judged at both speeds."""
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "transcripts_scale.py"), "--quick", "--rss-n", "3"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=BENCHMARKS, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"transcripts_scale --quick failed:\n{proc.stderr[-2000:]}"
    data = json.loads(proc.stdout)
    assert data["benchmark"] == "transcripts_scale" and data["quick"] is True
    n, turns = data["log"]["conversations"], data["log"]["turns"]
    imported = data["import"]
    assert "error" not in imported, imported
    assert imported["conversations"] == n and imported["exchanges"] == n * turns
    assert _positive(imported["conversations_per_s"])
    assert 0 < imported["baseline_rss_mb"] <= imported["peak_rss_mb"] < 4096
    assert set(data["judge"]) == {"offline:fast", "offline"}
    for speed, figures in data["judge"].items():
        assert "error" not in figures, figures
        assert figures["judge"] == speed and figures["replies"] == 4 * turns  # --quick judges 4 conversations
        # Every reply judged under the three reply protocols and triaged, each conversation judged whole, all ok.
        assert figures["judgments"] == figures["judgments_ok"] == 4 * figures["replies"] + 4
        assert _positive(figures["replies_per_s"])
    (rss,) = data["judge_rss_by_conversations"]
    assert rss["conversations"] == 3 and rss["replies"] == 3 * turns and rss["judgments_ok"] == rss["judgments"]


def test_transcripts_scale_takes_its_replies_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--replies-from: the log's assistant turns are the file's replies (English conversations), every one distinct
    within a conversation; without it, the script's own phrases in English and Chinese."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import transcripts_scale

    replies = [f"Reply number {i}. It has a second sentence, as real replies do." for i in range(7)]
    monkeypatch.setattr(transcripts_scale, "REAL_REPLIES", replies)
    log = tmp_path / "log.jsonl"
    transcripts_scale.write_log(log, 2, 5)
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        said = [m["content"].rsplit(" #", 1)[0] for m in row["messages"] if m["role"] == "assistant"]
        assert row["language"] == "en" and len(said) == 5 and len(set(said)) == 5 and set(said) <= set(replies)
    monkeypatch.setattr(transcripts_scale, "REAL_REPLIES", [])
    transcripts_scale.write_log(log, 2, 5)
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [row["language"] for row in rows] == ["en", "zh"]
    assert not any(m["content"].startswith("Reply number") for row in rows for m in row["messages"])
