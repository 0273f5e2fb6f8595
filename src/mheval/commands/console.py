"""Where the commands print: the two consoles, the one line bad input is told with, tables of a frame.

Every command prints through `out` (results) and `err` (progress, notes, errors), so a test's captured streams
and a CI log see the same text.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console, ConsoleDimensions
from rich.table import Table
from rich.text import Text

from mheval.errors import InputError

PIPED_WIDTH = 120
"""Where output goes to a file or a CI log and COLUMNS is not set: the width tables are laid out in."""


class _Console(Console):
    """A console whose prose is never cut at its width (soft wrap: a line is printed whole; summary and
    verdict texts wrap themselves between clauses), and whose tables fit COLUMNS when it is set (read at
    each print, not once at import), else the terminal, else PIPED_WIDTH."""

    def __init__(self, stderr: bool = False) -> None:
        super().__init__(stderr=stderr, soft_wrap=True)

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        columns = os.environ.get("COLUMNS", "").strip()
        if columns.isdigit() and int(columns) > 0:
            return ConsoleDimensions(int(columns), size.height)
        return size if self.is_terminal else ConsoleDimensions(PIPED_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


def _console(stderr: bool = False) -> Console:
    return _Console(stderr=stderr)


out = _console()
err = _console(stderr=True)

# Exit codes: 2 bad input (errors.InputError), 3 a finished run with units that failed at the provider, or
# with nothing to read (every conversation failed in the simulator, or no unit could be judged).
EXIT_PROVIDER_ERRORS = 3


def content_note() -> str:
    """The content warning printed before conversations, with the international directory of
    mheval.resources.warning_lines (crisis_lines.yaml)."""
    from mheval.resources import warning_lines

    directory = next(line.number for line in warning_lines() if not line.codes)
    return (
        "Content warning: these conversations discuss suicide, self-harm and other crises. If you need "
        f"support now, see https://{directory} (international) or call your local emergency number."
    )


def input_error_line(exc: InputError) -> Text:
    """The one line bad input is told with. The message quotes the user's data (ids, labels, paths) and our
    own bracketed text (`pip install 'mheval[local]'`, `[seeker]`): as a Text it prints as written, never
    read as rich markup or :emoji: codes."""
    return Text.assemble(("error:", "bold red"), " ", str(exc))


def print_frame(frame: Any, title: str, format: str) -> None:
    """A frame as JSON records, CSV, or a rich table whose cells print as written."""
    if format == "json":
        print(frame.to_json(orient="records", force_ascii=False, indent=2))
    elif format == "csv":
        print(frame.to_csv(index=False), end="")
    elif format == "table":
        # rich reads str cells and titles as markup and :emoji: codes; data goes in as Text, read as written
        table = Table(title=Text(title))
        cells = {col: ["" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in frame[col]]
                 for col in frame.columns}  # fmt: skip
        # Columns with nothing in them are left out, and short ones never wrap: the width goes to the text.
        shown = [col for col in frame.columns if any(c.strip() and c != "nan" for c in cells[col])]
        for col in shown:
            short = max((len(c) for c in [str(col), *cells[col]]), default=0) <= 20
            table.add_column(Text(str(col)), overflow="fold", no_wrap=short)
        for i in range(len(frame)):
            table.add_row(*(Text(cells[col][i]) for col in shown))
        out.print(table)
    else:
        raise InputError(f"unknown format {format!r}", field="format", choices=("table", "json", "csv"))


__all__ = ["EXIT_PROVIDER_ERRORS", "PIPED_WIDTH", "content_note", "err", "input_error_line", "out", "print_frame"]
