"""A rich progress bar for the engine's stages: rate, ETA, tokens and cost so far."""

from __future__ import annotations

import time

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


class RichProgress:
    """Implements engine.runner.ProgressSink. Use as a context manager.

    `advance` only counts; the bar is brought up to date at most every REFRESH_S and at the end."""

    def __init__(self, console: Console) -> None:
        self._prompt = 0
        self._completion = 0
        self._cost = 0.0
        self._bar = Progress(
            TextColumn("[bold]{task.description:<9}"),
            BarColumn(),
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
        """Tokens and cost so far."""
        return Usage(prompt_tokens=self._prompt, completion_tokens=self._completion, cost_usd=self._cost)

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._refresh()
        self._bar.stop()

    def start(self, stage: str, total: int) -> None:
        self._refresh()
        self._tasks[stage] = self._bar.add_task(stage, total=total, rate="", tokens="")

    def advance(self, stage: str, usage: Usage | None = None) -> None:
        if usage is not None:
            self._prompt += usage.prompt_tokens
            self._completion += usage.completion_tokens
            self._cost += usage.cost_usd
        self._pending[stage] = self._pending.get(stage, 0) + 1
        if time.monotonic() - self._last >= REFRESH_S:
            self._refresh()

    def _refresh(self) -> None:
        self._last = time.monotonic()
        tokens = f"{self._prompt + self._completion:,} tok" + (f" ${self._cost:.4f}" if self._cost else "")
        for stage, count in self._pending.items():
            task_id = self._tasks[stage]
            self._bar.advance(task_id, count)
            speed = self._bar.tasks[task_id].speed or 0.0
            self._bar.update(task_id, rate=f"{speed:.1f}/s", tokens=tokens)
        self._pending.clear()
