"""Bad input: one clear line, exit code 2, nothing written.

Most commands run in-process through the console entry point's own path (tests/cli_inprocess.py: `main`'s
exit code 2 and its one line); the tests of how that line is printed run the real entry point
(`python -m mheval`) in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_inprocess import Ran
from cli_inprocess import mheval as _inprocess


def mheval(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Ran:
    return _inprocess(*args, cwd=cwd, env=env)


def entry_point(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real console entry point, for what only it shows: how the error line is printed."""
    return subprocess.run([sys.executable, "-m", "mheval", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ), stdin=subprocess.DEVNULL)  # fmt: skip


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
        (
            "latin1.jsonl",
            GOOD.encode() + '{"id": "b", "text": "caf\u00e9"}\n'.encode("latin-1"),
            ["latin1.jsonl", "UTF-8"],
        ),
        ("empty.jsonl", "", ["no cases"]),
        (
            "label.jsonl",
            GOOD + '{"id": "b", "text": "x", "crisis_label": "sad"}\n',
            ["label.jsonl:2", "crisis_label", "suicidal_ideation"],
        ),
    ],
)
def test_bad_suite_files(tmp_path, name, content, expected):
    path = _write(tmp_path / name, content)
    out = tmp_path / "run"
    result = mheval(
        "run",
        "--suite",
        f"jsonl:{path}",
        "--model",
        "vllm/x@http://127.0.0.1:9/v1",
        "--out",
        str(out),
        "--quiet",
        cwd=tmp_path,
    )
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
    result = mheval(
        "run", "--protocol", "mentalalign", "--judge", "offline", "--out", str(tmp_path / "r"), "--quiet", cwd=tmp_path
    )
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


# -- inputs that used to crash or to be read wrongly ----------------------------------------------


def _bad_utf8_parquet(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = pa.array([b"a calm day", b"\xff\xfe not text"], type=pa.binary()).view(pa.string())
    pq.write_table(pa.table({"id": ["a", "b"], "text": text}), path)
    return path


@pytest.mark.parametrize(
    ("suite", "make", "expected"),
    [
        ("parquet:bad.parquet", _bad_utf8_parquet, ["bad.parquet:2", "field 'text'", "UTF-8"]),
        ("help-harm:deep.json", lambda p: _write(p, "[" * 100_000 + "]" * 100_000), ["deep.json:1", "nested"]),
        (
            "jsonl:deep.jsonl",
            lambda p: _write(p, '{"id": "a", "text": "x", "m": ' + '{"k": ' * 100_000 + "1" + "}" * 100_000 + "}\n"),
            ["deep.jsonl:1", "nested"],
        ),
        ("csv:open.csv", lambda p: _write(p, 'id,text\na,"open quote\nb,next\n'), ["open.csv:2", "never closed"]),
        ("jsonl:sur.jsonl", lambda p: _write(p, '{"id": "a", "text": "\\ud800"}\n'), ["sur.jsonl:1", "surrogate"]),
    ],
)
def test_bad_inputs_exit_2_and_leave_no_run_folder(tmp_path, suite, make, expected):
    make(tmp_path / suite.split(":", 1)[1])
    out = tmp_path / "DIR"
    result = mheval("triage", "--suite", suite, "--judge", "offline", "--out", str(out), "--quiet", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    for fragment in expected:
        assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists(), "bad input must leave nothing behind"


def test_user_text_is_never_read_as_markup(tmp_path):
    bad = _write(tmp_path / "label.jsonl", '{"id": "[/x]", "text": "hi", "crisis_label": "[/x] [bold]:smile:"}\n')
    result = entry_point(
        "triage", "--suite", f"jsonl:{bad}", "--judge", "offline", "--out", str(tmp_path / "r"), cwd=tmp_path
    )
    assert result.returncode == 2, result.stderr
    assert "MarkupError" not in result.stderr
    assert "unknown crisis_label '[/x] [bold]:smile:'" in result.stderr

    # What the commands print on success goes through the same console in-process (only the error line above
    # is printed by the entry point itself).
    good = _write(tmp_path / "ids.jsonl", '{"id": "[/x]", "text": "a [red]plain[/red] day"}\n')
    result = mheval("suites", "show", f"jsonl:{good}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "[/x]" in result.stdout and "a [red]plain[/red] day" in result.stdout
    result = mheval(
        "triage",
        "--suite",
        f"jsonl:{good}",
        "--judge",
        "offline",
        "--out",
        str(tmp_path / "run[/x]"),
        "--quiet",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "run[/x]" in result.stdout


def test_error_text_keeps_its_brackets(tmp_path):
    ds = _write(tmp_path / "ds.jsonl", '{"id": 1, "context": "before any marker[seeker]hello"}\n')
    result = entry_point("suites", "show", f"dialogue-safety:{ds}", cwd=tmp_path)
    assert result.returncode == 2
    assert "[seeker]/[supporter]" in result.stderr, result.stderr


def test_install_hint_printed_in_full(monkeypatch, capsys):
    """The one printing point (cli.main) shows `mheval[local]`, not `mheval` with the brackets eaten."""
    import mheval.suites
    from mheval import cli
    from mheval.errors import InputError

    def refuse(*args, **kwargs):
        raise InputError("the embedded target needs the local extra: pip install 'mheval[local]' [/x]")

    monkeypatch.setattr(mheval.suites, "load_suite", refuse)
    monkeypatch.setattr(sys, "argv", ["mheval", "suites", "show", "anything"])
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    assert "pip install 'mheval[local]' [/x]" in capsys.readouterr().err


def test_own_jsonl_export_reads_back(tmp_path):
    """Separators that str.splitlines() breaks on, through a run, its export, and back in as a suite."""
    import json

    rows = [{"id": "a\u2028b", "text": "one\u2028two\x85three"}, {"id": "c", "text": "plain\x0cday"}]
    _write(tmp_path / "s.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    run = tmp_path / "run"
    assert (
        mheval(
            "triage", "--suite", "jsonl:s.jsonl", "--judge", "offline", "--out", str(run), "--quiet", cwd=tmp_path
        ).returncode
        == 0
    )
    exported = tmp_path / "cases.jsonl"
    result = mheval(
        "export", str(run), "--table", "cases", "--format", "jsonl", "--output", str(exported), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    result = mheval("suites", "show", f"jsonl:{exported}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "2 cases" in result.stdout


def test_help_harm_release_shape_is_described(tmp_path):
    import json

    released = [{"dataset_id": "hugg_3", "inputs": ["I feel off today.", "Nothing helps."]}]
    path = _write(tmp_path / "sampled_dataset_n_2046_nPerD168_seed0.json", json.dumps(released, indent=2))
    result = mheval("suites", "show", f"help-harm:{path}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "hugg_3-0001" in result.stdout
    assert "ids derived as <dataset_id>-<position>" in " ".join(result.stdout.split())


def test_bad_responses_file_exits_2(tmp_path):
    suite = _write(tmp_path / "s.jsonl", GOOD)
    replies = _write(tmp_path / "r.jsonl", b'{"case_id": "a", "model": "m", "text": "ok"}\n{"mo\xffdel"}\n')
    out = tmp_path / "run"
    result = mheval(
        "judge",
        "--suite",
        f"jsonl:{suite}",
        "--responses",
        str(replies),
        "--protocol",
        "psycrisis",
        "--judge",
        "offline",
        "--out",
        str(out),
        "--quiet",
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert "r.jsonl:2" in result.stderr and "UTF-8" in result.stderr
    assert not out.exists()
