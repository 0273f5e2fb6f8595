"""A rich progress bar for the engine's stages: rate, ETA, tokens and cost so far."""

from __future__ import annotations

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


class RichProgress:
    """Implements engine.runner.ProgressSink. Use as a context manager."""

    def __init__(self, console: Console) -> None:
        self.usage = Usage()
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

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def start(self, stage: str, total: int) -> None:
        self._tasks[stage] = self._bar.add_task(stage, total=total, rate="", tokens="")

    def advance(self, stage: str, usage: Usage | None = None) -> None:
        if usage is not None:
            self.usage = self.usage + usage
        task_id = self._tasks[stage]
        self._bar.advance(task_id)
        task = self._bar.tasks[task_id]
        speed = task.speed or 0.0
        tokens = self.usage.prompt_tokens + self.usage.completion_tokens
        cost = f" ${self.usage.cost_usd:.4f}" if self.usage.cost_usd else ""
        self._bar.update(task_id, rate=f"{speed:.1f}/s", tokens=f"{tokens:,} tok{cost}")
