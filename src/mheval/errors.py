"""Errors that mean "the user's input is wrong": the CLI turns them into one clear line and exit code 2."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad input, located as precisely as we can: file, line, field, and what is allowed instead."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        choices: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.choices = list(choices) if choices else None
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path:
            where = self.path + (f":{self.line}" if self.line is not None else "")
        parts = [p for p in (where, f"field '{self.field}'" if self.field else "") if p]
        text = (": ".join(parts) + ": " if parts else "") + self.message
        if self.choices:
            text += f" (choose from: {', '.join(self.choices)})"
        return text
