"""Progress of the engine's stages: a rich bar on a terminal (rate, ETA, tokens and cost so far), and
plain lines every few seconds where stderr is not a terminal (CI, `| tee log`)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from mheval.records import Usage

# Redraw at most this often: rich's update costs about 0.2 ms, as much as a whole judgment should.
REFRESH_S = 0.1

Spent = Callable[[], tuple[int, Usage]]
"""The model calls a run has made so far and their tokens (engine.runner.ProgressSink.watch)."""


def _nothing_spent() -> tuple[int, Usage]:
    return 0, Usage()


def spent_text(calls: int, usage: Usage, cache_hits: int | None = None) -> str:
    """The run's model calls and their tokens, labelled the same in the progress and the closing line."""
    hits = f" ({cache_hits:,} answered from cache)" if cache_hits is not None else ""
    cost = f", ${usage.cost_usd:.4f}" if usage.cost_usd else ""
    tokens = usage.prompt_tokens + usage.completion_tokens
    return f"{calls:,} model calls{hits}, {tokens:,} tokens (prompt + completion){cost}"


class RichProgress:
    """Implements engine.runner.ProgressSink. Use as a context manager.

    `advance` only counts; the bar is brought up to date at most every REFRESH_S and at the end."""

    def __init__(self, console: Console) -> None:
        self._spent: Spent = _nothing_spent
        self._bar = Progress(
            TextColumn("[bold]{task.description:<9}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>8}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[tokens]}"),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}
        self._pending: dict[str, int] = {}
        self._last = 0.0

    @property
    def usage(self) -> Usage:
        """Tokens and cost of the run's model calls so far."""
        return self._spent()[1]

    def watch(self, spent: Spent) -> None:
        self._spent = spent

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._refresh()
        self._bar.stop()

    def start(self, stage: str, total: int | None) -> None:
        self._refresh()
        self._tasks[stage] = self._bar.add_task(stage, total=total, rate="", tokens="")

    def advance(self, stage: str, usage: Usage | None = None, *, failed: bool = False) -> None:
        self._pending[stage] = self._pending.get(stage, 0) + 1
        if time.monotonic() - self._last >= REFRESH_S:
            self._refresh()

    def _refresh(self) -> None:
        self._last = time.monotonic()
        tokens = spent_text(*self._spent())
        for stage, count in self._pending.items():
            task_id = self._tasks[stage]
            self._bar.advance(task_id, count)
            speed = self._bar.tasks[task_id].speed or 0.0
            self._bar.update(task_id, rate=f"{speed:.1f}/s", tokens=tokens)
        self._pending.clear()


# A plain progress line at most this often (MHEVAL_PROGRESS_EVERY overrides it, in seconds).
PLAIN_EVERY_S = 5.0


class PlainProgress:
    """Implements engine.runner.ProgressSink for a stderr that is not a terminal: one plain line per
    stage every `every_s` seconds, and one when a stage ends, e.g.

        progress: judge 120/400 (30%) · 11.8/s · 2 failed · 318 model calls, 45,678 tokens (prompt + completion) · 10s

    `failed` counts the stage's units that came back failed or unscored; the model calls and tokens are the
    whole run's so far (cache hits and the offline judge make none), the numbers the closing line ends with.
    A stage with no known total (a multi-turn run's turns) shows its count alone. Use as a context manager."""

    def __init__(self, stream: IO[str], every_s: float = PLAIN_EVERY_S) -> None:
        self._stream = stream
        self._every = every_s
        self._stages: dict[str, dict[str, float]] = {}
        self._order: list[str] = []
        self._spent: Spent = _nothing_spent
        self._last = time.monotonic()

    def watch(self, spent: Spent) -> None:
        self._spent = spent

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for stage in self._order:  # stages whose end was not shown: no known total, or cut short
            if not self._stages[stage].get("ended"):
                self._line(stage)

    def start(self, stage: str, total: int | None) -> None:
        self._stages[stage] = {"total": -1 if total is None else total, "done": 0, "failed": 0,
                               "started": time.monotonic()}  # fmt: skip
        if stage not in self._order:
            self._order.append(stage)

    def advance(self, stage: str, usage: Usage | None = None, *, failed: bool = False) -> None:
        counts = self._stages.get(stage)
        if counts is None:
            self.start(stage, None)
            counts = self._stages[stage]
        counts["done"] += 1
        counts["failed"] += int(failed)
        if counts["done"] == counts["total"]:  # the stage's last unit: its final line now
            counts["ended"] = 1
            self._line(stage)
        now = time.monotonic()
        if now - self._last >= self._every:
            self._last = now
            for name in self._order:
                if not self._stages[name].get("ended"):
                    self._line(name)

    def _line(self, stage: str) -> None:
        c = self._stages[stage]
        elapsed = max(time.monotonic() - c["started"], 1e-9)
        done, total = int(c["done"]), int(c["total"])
        share = f"{done}" if total < 0 else f"{done}/{total}" + (f" ({100 * done / total:.0f}%)" if total else "")
        self._stream.write(
            f"progress: {stage} {share} · {done / elapsed:.1f}/s · {int(c['failed'])} failed · "
            f"{spent_text(*self._spent())} · {elapsed:.0f}s\n"
        )
        self._stream.flush()


@contextlib.contextmanager
def progress_for(console: Console, quiet: bool = False) -> Iterator[RichProgress | PlainProgress | None]:
    """The progress a command shows on `console` (stderr): a rich bar on a terminal, a plain line every
    MHEVAL_PROGRESS_EVERY seconds (default 5) elsewhere, nothing with `quiet` or MHEVAL_QUIET set."""
    if quiet or os.environ.get("MHEVAL_QUIET", "").strip() not in ("", "0"):
        yield None
    elif console.is_terminal:
        with RichProgress(console) as bar:
            yield bar
    else:
        every = os.environ.get("MHEVAL_PROGRESS_EVERY", "")
        try:
            seconds = float(every) if every else PLAIN_EVERY_S
        except ValueError:
            seconds = PLAIN_EVERY_S
        with PlainProgress(console.file or sys.stderr, seconds) as lines:
            yield lines
