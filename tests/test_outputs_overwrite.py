"""Outputs never replace a run's own files, nor a user's file unless asked (--overwrite), and are written whole.

The commands run in-process through the console entry point's own path (tests/cli_inprocess.py: exit code 2
and the one line `main` prints for bad input); tests/test_cli_errors.py runs the entry point itself.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from cli_inprocess import Ran
from cli_inprocess import mheval as _mheval
from mheval.errors import InputError
from mheval.fileio import atomic_path, atomic_write, check_output, csv_safe
from mheval.records import Case, Judgment, Response, Turn
from mheval.runfolder.store import Store

RUN_FILES = ("run.db", "run.db-wal", "run.db-shm", "config.yaml", ".mheval.lock", "human_labels.csv")


def mheval(*args: str, cwd: Path) -> Ran:
    return _mheval(*args, cwd=cwd)


def _digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` (but the WAL side files SQLite may touch on open) by content hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("outputs") / "run"
    with Store.open(run_dir) as store:
        store.set_meta("config", {"suite": "tiny", "models": ["m"], "judges": ["j"], "protocols": ["psycrisis"]})
        store.put_cases([Case(id=f"c{i}", turns=[Turn(role="user", content=f"I feel low {i}")]) for i in range(3)])
        for i in range(3):
            store.put_response(Response(case_id=f"c{i}", model="m", text="ok"))
            store.put_judgment(
                Judgment(
                    case_id=f"c{i}",
                    protocol="psycrisis",
                    judge="j",
                    model="m",
                    sample=0,
                    scores={"empathy_collaboration": 0.0},
                    total=0.0,
                )
            )
    (run_dir / "config.yaml").write_text("suite: tiny\n", encoding="utf-8")
    (run_dir / "human_labels.csv").write_text("id,rater,value\nc0,H1,3\n", encoding="utf-8")
    (run_dir / ".mheval.lock").write_text("", encoding="utf-8")
    return run_dir


@pytest.mark.parametrize("name", RUN_FILES)
@pytest.mark.parametrize("command", ["report", "export", "compare"])
def test_outputs_never_replace_a_runs_own_files(run, tmp_path, name, command):
    target = run / name
    if not target.exists():  # run.db-wal/-shm: refused whether SQLite left them or not
        target.write_bytes(b"")
    before = _digest(run)
    args = [command, str(run), *([str(run)] if command == "compare" else []), "--output", str(target), "--overwrite"]
    if command != "report":
        args += ["--format", "csv"]
    result = mheval(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "run folder" in lines[0] and name in lines[0]
    assert _digest(run) == before
    assert not list(run.rglob("*.tmp"))


def test_a_symlink_to_run_db_is_refused_too(run, tmp_path):
    link = tmp_path / "innocent.db"
    link.symlink_to(run / "run.db")
    before = _digest(run)
    result = mheval("export", str(run), "--format", "csv", "--output", str(link), "--overwrite", cwd=tmp_path)
    assert result.returncode == 2 and "run.db" in result.stderr
    assert _digest(run) == before


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_export_needs_overwrite_for_an_existing_file(run, tmp_path, fmt):
    target = tmp_path / f"mine.{fmt}"
    target.write_text("my own notes", encoding="utf-8")
    refused = mheval("export", str(run), "--format", fmt, "--output", str(target), cwd=tmp_path)
    assert refused.returncode == 2 and "--overwrite" in refused.stderr
    assert target.read_text(encoding="utf-8") == "my own notes"
    done = mheval("export", str(run), "--format", fmt, "--output", str(target), "--overwrite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert target.read_bytes() != b"my own notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"mine.{fmt}"]  # no temporary left behind


def test_export_to_a_missing_folder_or_a_folder_is_one_clear_line(run, tmp_path):
    for target in (tmp_path / "no" / "such" / "out.csv", tmp_path):
        result = mheval("export", str(run), "--format", "csv", "--output", str(target), cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_report_output_refuses_to_replace_a_file_or_tables_beside_it(run, tmp_path):
    out = tmp_path / "share"
    out.mkdir()
    (out / "tables").mkdir()
    mine = out / "tables" / "run_models.csv"
    mine.write_text("a table of my own", encoding="utf-8")
    refused = mheval("report", str(run), "--output", str(out / "r.html"), cwd=tmp_path)
    assert refused.returncode == 2 and "run_models.csv" in refused.stderr and "--overwrite" in refused.stderr
    assert mine.read_text(encoding="utf-8") == "a table of my own"
    assert not (out / "r.html").exists()  # nothing half-written: the check comes before any write

    mine.unlink()
    first = mheval("report", str(run), "--output", str(out / "r.html"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = mheval("report", str(run), "--output", str(out / "r.html"), cwd=tmp_path)
    assert again.returncode == 2 and "--overwrite" in again.stderr
    forced = mheval("report", str(run), "--output", str(out / "r.html"), "--overwrite", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr


def test_the_runs_own_report_is_renewed_without_asking(run, tmp_path):
    for _ in range(2):
        result = mheval("report", str(run), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    assert (run / "report.html").is_file() and (run / "tables" / "psycrisis_dimensions.csv").is_file()
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path):
    target = tmp_path / "keep.txt"
    atomic_write(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half", encoding="utf-8")
        raise RuntimeError("killed mid-write")
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["keep.txt"]


def test_check_output_rules(run, tmp_path):
    with pytest.raises(InputError, match="run folder"):
        check_output(run / "run.db", overwrite=True)
    with pytest.raises(InputError, match="run folder"):
        check_output(run / "redacted.jsonl", overwrite=True)  # a --redact store run's own file
    # A file that merely shares a name with a run's file is fine outside a run folder.
    assert check_output(tmp_path / "config.yaml", overwrite=False) == tmp_path / "config.yaml"
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="is a file"):
        check_output(tmp_path / "f" / "out.csv", overwrite=True, make_parents=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("＝1+1", "'＝1+1"),
        ("-3", "-3"),
        ("-3.5e2", "-3.5e2"),
        ("+7", "+7"),
        ("plain", "plain"),
        ("a=b", "a=b"),
        ("", ""),
        (-3.0, -3.0),
        (None, None),
    ],
)
def test_csv_safe(value, expected):
    assert csv_safe(value) == expected


def test_compare_output_needs_overwrite(run, tmp_path):
    target = tmp_path / "diff.csv"
    target.write_text("mine", encoding="utf-8")
    refused = mheval("compare", str(run), str(run), "-f", "csv", "--output", str(target), cwd=tmp_path)
    assert refused.returncode == 2 and target.read_text(encoding="utf-8") == "mine"
    done = mheval("compare", str(run), str(run), "-f", "csv", "--output", str(target), "--overwrite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert target.read_text(encoding="utf-8").startswith("metric,model_a,model_b")


def test_csv_exports_neutralise_formula_ids(tmp_path):
    ids = ['=HYPERLINK("http://x","y")', "+1+2", "@SUM(A1)", "-3"]
    with Store.open(tmp_path / "f") as store:
        store.put_cases([Case(id=i, turns=[Turn(role="user", content="=2+2 as text")]) for i in ids])
        for i in ids:
            store.put_response(Response(case_id=i, model="-model", text="@reply"))
    out = tmp_path / "responses.csv"
    result = mheval("export", str(tmp_path / "f"), "-t", "responses", "-f", "csv", "--output", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    import csv

    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    assert [r["case_id"] for r in rows] == ["'" + i if i != "-3" else i for i in ids]
    assert {r["model"] for r in rows} == {"'-model"} and {r["text"] for r in rows} == {"'@reply"}
    # JSONL keeps the values exactly as they are (it is read by programs, not spreadsheets).
    jsonl = mheval("export", str(tmp_path / "f"), "-t", "responses", cwd=tmp_path).stdout
    assert '"case_id": "=HYPERLINK' in jsonl
