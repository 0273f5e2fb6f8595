"""`mheval.api.compare_text`: the comparison of two runs as `mheval compare` prints or writes it, made by the API
so the command only prints it. Two small run folders written straight into a store (tests/test_compare.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from cli_inprocess import mheval as cli
from mheval import api
from mheval.errors import InputError
from test_compare import A, B, make_run


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    return make_run(tmp_path / "a", "m", {0: A}), make_run(tmp_path / "b", "m", {0: B})


def test_each_format_holds_the_comparisons_rows(runs):
    a, b = runs
    frame = api.compare(a, b)
    records = json.loads(api.compare_text(a, b, format="json"))
    assert len(records) == len(frame) and [r["metric"] for r in records] == list(frame["metric"])
    assert [r["diff"] for r in records] == pytest.approx(list(frame["diff"]), nan_ok=True)
    read_back = pd.read_csv(io.StringIO(api.compare_text(a, b, format="csv")))
    assert list(read_back["metric"]) == list(frame["metric"])
    assert list(read_back["diff"]) == pytest.approx(list(frame["diff"]), nan_ok=True)
    table = api.compare_text(a, b)
    assert "appropriateness" in table and not table.lstrip().startswith(("[", "metric,"))


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_the_command_prints_the_apis_text(runs, fmt):
    a, b = runs
    shown = cli("compare", str(a), str(b), "-f", fmt)
    # click's test runner reads the output's CRLF (CSV rows) as LF
    assert shown.exit_code == 0 and shown.stdout == api.compare_text(a, b, format=fmt).replace("\r\n", "\n")


def test_an_output_is_written_and_not_replaced_without_overwrite(runs, tmp_path):
    a, b = runs
    target = tmp_path / "diff.csv"
    text = api.compare_text(a, b, format="csv", output=target)
    assert target.read_bytes().decode("utf-8") == text  # bytes: read as text, CRLF would come back as LF
    target.write_text("mine", encoding="utf-8")
    with pytest.raises(InputError, match="--overwrite"):
        api.compare_text(a, b, format="csv", output=target)
    assert target.read_text(encoding="utf-8") == "mine"
    api.compare_text(a, b, format="csv", output=target, overwrite=True)
    assert target.read_bytes().decode("utf-8") == text
    shown = cli("compare", str(a), str(b), "-f", "csv", "--output", str(tmp_path / "other.csv"))
    assert shown.exit_code == 0 and shown.stdout == ""
    assert (tmp_path / "other.csv").read_bytes().decode("utf-8") == text


def test_bad_input_is_refused_before_either_run_is_read(tmp_path):
    nowhere = tmp_path / "no-run"  # not a run folder: reading it would fail with another message
    with pytest.raises(InputError, match="unknown format 'xml'") as bad_format:
        api.compare_text(nowhere, nowhere, format="xml")
    assert bad_format.value.choices is not None and "csv" in bad_format.value.choices
    taken = tmp_path / "taken.csv"
    taken.write_text("mine", encoding="utf-8")
    with pytest.raises(InputError, match="--overwrite"):
        api.compare_text(nowhere, nowhere, format="csv", output=taken)
    shown = cli("compare", str(nowhere), str(nowhere), "-f", "xml")
    assert shown.exit_code == 2 and "unknown format" in shown.stderr
