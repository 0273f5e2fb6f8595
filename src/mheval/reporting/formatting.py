"""Numbers as people read them, and DataFrames as display tables (header, cells, which columns are numbers)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

TEXT_WIDTH = 100
"""Prose lines of the plain-text output (summary, the verdict) are wrapped to this width: a log or a file
shows them whole and readable, where a console would cut them at its own width, mid-phrase."""


def _clauses(text: str) -> list[str]:
    """`text` cut after each "; " and ", " outside brackets: the places a line can break without splitting
    a phrase (an interval, a parenthesis, "sample 0")."""
    pieces, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch in ";," and depth == 0 and text[i + 1 : i + 2] == " ":
            pieces.append(text[start : i + 1])
            start = i + 2
    pieces.append(text[start:])
    return [p for p in pieces if p]


def wrap(line: str, width: int = TEXT_WIDTH) -> str:
    """One prose line wrapped to `width` between clauses (at word boundaries only inside a clause longer
    than a line), its continuation lines indented two spaces under it."""
    if len(line) <= width:
        return line
    indent = line[: len(line) - len(line.lstrip())]
    more = indent + "  "
    lines: list[str] = []
    current = indent
    for piece in _clauses(line.strip()):
        gap = " " if current.strip() else ""
        if len(current) + len(gap) + len(piece) <= width:
            current += gap + piece
            continue
        if len(more) + len(piece) <= width:  # fits a line of its own
            lines.append(current)
            current = more + piece
            continue
        # A clause longer than any line: at word boundaries, from where the line stands.
        filled = textwrap.wrap(piece, width, initial_indent=current + gap, subsequent_indent=more,
                               break_long_words=False, break_on_hyphens=False)  # fmt: skip
        lines.extend(filled[:-1])
        current = filled[-1]
    lines.append(current)
    return "\n".join(lines)


def missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA


def num(x: Any, digits: int = 2) -> str:
    if missing(x):
        return "–"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) >= 1000):
        return f"{int(x):,}"
    return f"{float(x):.{digits}f}"


def interval(value: Any, low: Any, high: Any, digits: int = 2) -> str:
    """`3.25 [2.90, 3.60]`; the interval is left out when there is none."""
    if missing(value):
        return "–"
    text = f"{float(value):.{digits}f}"
    if not missing(low) and not missing(high):
        text += f" [{float(low):.{digits}f}, {float(high):.{digits}f}]"
    return text


def pct(value: Any, low: Any = None, high: Any = None, k: Any = None, n: Any = None) -> str:
    """`75% [30–95%] 3/4`."""
    if missing(value):
        return "–"
    text = f"{100 * float(value):.0f}%"
    if not missing(low) and not missing(high):
        text += f" [{100 * float(low):.0f}–{100 * float(high):.0f}%]"
    if not missing(k) and not missing(n):
        text += f" · {int(k)}/{int(n)}"
    return text


def money(x: Any) -> str:
    return "–" if missing(x) else f"${float(x):,.4f}" if float(x) < 1 else f"${float(x):,.2f}"


def seconds(x: Any) -> str:
    if missing(x):
        return "–"
    x = float(x)
    if x < 120:
        return f"{x:.1f} s"
    if x < 7200:
        return f"{x / 60:.1f} min"
    return f"{x / 3600:.1f} h"


@dataclass
class Column:
    header: str
    cell: Callable[[dict[str, Any]], str]
    numeric: bool = True
    title: str | None = None  # hover text explaining the column


def col(
    key: str,
    header: str | None = None,
    fmt: Callable[[Any], str] | None = None,
    numeric: bool = True,
    title: str | None = None,
) -> Column:
    def cell(row: dict[str, Any]) -> str:
        value = row.get(key)
        if fmt is not None:
            return fmt(value)
        return "–" if missing(value) else str(value)

    return Column(header or key, cell, numeric, title)


def text(key: str, header: str | None = None, title: str | None = None) -> Column:
    return col(key, header, numeric=False, title=title)


def est(prefix: str, header: str, digits: int = 2, title: str | None = None) -> Column:
    return Column(
        header, lambda r: interval(r.get(prefix), r.get(f"{prefix}_low"), r.get(f"{prefix}_high"), digits), True, title
    )


def rate(prefix: str, header: str, n_key: str = "n", title: str | None = None) -> Column:
    return Column(
        header,
        lambda r: pct(
            r.get(f"{prefix}_rate"),
            r.get(f"{prefix}_rate_low"),
            r.get(f"{prefix}_rate_high"),
            r.get(f"{prefix}_n"),
            r.get(n_key),
        ),
        True,
        title,
    )


@dataclass
class DisplayTable:
    headers: list[str]
    titles: list[str | None]
    numeric: list[bool]
    rows: list[list[str]]
    emphasis: list[bool]  # rows to set apart (the "all categories" rows)
    first: list[bool]  # rows that start a new group (a line above them)

    def __bool__(self) -> bool:
        return bool(self.rows)


def display(
    frame: pd.DataFrame,
    columns: Sequence[Column],
    emphasise: Callable[[dict[str, Any]], bool] | None = None,
    group: int = 0,
) -> DisplayTable:
    """Cells as strings; the first `group` columns are shown once per run of equal values, for readability."""
    records = [] if frame is None or frame.empty else frame.to_dict("records")
    rows = [[c.cell(r) for c in columns] for r in records]
    first = [False] * len(rows)
    if group:
        previous: list[str] | None = None
        for i, row in enumerate(rows):
            key = row[:group]
            if previous is not None and key != previous:
                first[i] = True
            if key == previous:
                rows[i] = [""] * group + row[group:]
            previous = key
    return DisplayTable(
        headers=[c.header for c in columns],
        titles=[c.title for c in columns],
        numeric=[c.numeric for c in columns],
        rows=rows,
        emphasis=[bool(emphasise(r)) if emphasise else False for r in records],
        first=first,
    )


__all__ = [
    "Column",
    "DisplayTable",
    "col",
    "display",
    "est",
    "interval",
    "money",
    "num",
    "pct",
    "rate",
    "seconds",
    "text",
]
