"""Where the engine reports its progress: the protocol the runner and the multi-turn stages both take (the
CLI passes mheval/progress.py's bar, tests pass nothing). Its own module so the stages can name it without
importing the runner, which calls them."""

from __future__ import annotations

from typing import Protocol

from mheval.records import Usage


class ProgressSink(Protocol):
    """Where the engine reports progress; the CLI passes a rich progress bar, tests pass nothing."""

    def start(self, stage: str, total: int | None) -> None: ...  # None: not known ahead (a run's turns)

    def advance(self, stage: str, usage: Usage | None = None, *, failed: bool = False) -> None: ...

    # Optional: `watch(spent)` where spent() gives the model calls this run has made so far and their tokens,
    # the numbers the run ends with (RunResult.model_calls and usage), so progress and the end agree.
