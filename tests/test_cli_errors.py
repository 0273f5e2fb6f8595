"""Bad input through the real console entry point: one clear line, exit code 2, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def mheval(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mheval", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


GOOD = '{"id": "a", "text": "I feel fine today, just tired."}\n'


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("malformed.jsonl", GOOD + '{"id": "b", "text": \n', ["malformed.jsonl:2"]),
        ("missing.jsonl", GOOD + '{"id": "b", "language": "en"}\n', ["missing.jsonl:2", "text"]),
        ("latin1.jsonl", GOOD.encode() + '{"id": "b", "text": "caf\u00e9"}\n'.encode("latin-1"),
         ["latin1.jsonl", "UTF-8"]),
        ("empty.jsonl", "", ["no cases"]),
        ("label.jsonl", GOOD + '{"id": "b", "text": "x", "crisis_label": "sad"}\n',
         ["label.jsonl:2", "crisis_label", "suicidal_ideation"]),
    ],
)
def test_bad_suite_files(tmp_path, name, content, expected):
    path = _write(tmp_path / name, content)
    out = tmp_path / "run"
    result = mheval("run", "--suite", f"jsonl:{path}", "--model", "vllm/x@http://127.0.0.1:9/v1",
                    "--out", str(out), "--quiet", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    message = result.stderr
    for fragment in expected:
        assert fragment in message, message
    assert "Traceback" not in message
    assert not out.exists(), "bad input must not leave a half-made run folder"


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--protocol", "no-such-protocol", ["unknown protocol", "crisis-triage", "psycrisis"]),
        ("--suite", "no-such-suite", ["crisis-core"]),
        ("--model", "nosuchprovider/foo", ["provider", "openai"]),
    ],
)
def test_unknown_names_list_choices(tmp_path, flag, value, expected):
    out = tmp_path / "run"
    result = mheval("run", flag, value, "--out", str(out), "--quiet", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    for fragment in expected:
        assert fragment in result.stderr, result.stderr
    assert not out.exists()


def test_offline_judge_refuses_protocols_it_cannot_judge(tmp_path):
    result = mheval("run", "--protocol", "mentalalign", "--judge", "offline", "--out", str(tmp_path / "r"),
                    "--quiet", cwd=tmp_path)
    assert result.returncode == 2
    assert "offline judge cannot judge mentalalign" in result.stderr


def test_bad_config_key_names_choices(tmp_path):
    cfg = _write(tmp_path / "run.yaml", "suite: crisis-core\nmodel: openai/gpt-4o-mini\n")
    result = mheval("run", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 2
    assert "run.yaml" in result.stderr and "model" in result.stderr and "models" in result.stderr


def test_summary_of_non_run_folder(tmp_path):
    result = mheval("summary", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert "not a run folder" in result.stderr
