"""MentalAlign's workbooks are opened by one reader for the suite (`mentalalign:`) and the judges' import
(`mheval import mentalalign`): an unreadable file or an empty first sheet is an InputError naming the file,
and an import that meets one leaves no run folder behind."""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest

from mheval.analysis.importer import import_published
from mheval.errors import InputError
from mheval.suites import load_suite


def _empty_sheet(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    openpyxl.Workbook().save(path)  # one sheet, no rows
    return path


def _not_a_workbook(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("ConvID,context\n1,I feel stuck at work.\n", encoding="utf-8")  # a CSV under an .xlsx name
    return path


@pytest.mark.parametrize(
    ("make", "says"), [(_empty_sheet, "first sheet is empty"), (_not_a_workbook, "not a readable")]
)
def test_the_import_refuses_a_bad_judge_workbook_and_writes_nothing(tmp_path: Path, make, says: str) -> None:
    bad = make(tmp_path / "ma" / "judge_claude.xlsx")
    with pytest.raises(InputError, match=says) as refused:
        import_published("mentalalign", tmp_path / "ma", tmp_path / "run")
    assert refused.value.path == str(bad)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("make", "says"), [(_empty_sheet, "first sheet is empty"), (_not_a_workbook, "not a readable")]
)
def test_the_suite_reader_says_the_same(tmp_path: Path, make, says: str) -> None:
    bad = make(tmp_path / "human.xlsx")
    with pytest.raises(InputError, match=says) as refused:
        load_suite(f"mentalalign:{bad}")
    assert refused.value.path == str(bad)
