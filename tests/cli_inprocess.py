"""The CLI called in-process, the way the console entry point (`mheval.cli.main`) runs it: an InputError is
exit code 2 with its message, as `main` prints it. For tests where the subprocess is not what is tested
(tests/test_cli_errors.py keeps the real entry point)."""

from __future__ import annotations

from dataclasses import dataclass

from typer.testing import CliRunner

from mheval.cli import app
from mheval.errors import InputError


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def mheval(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Ran:
    result = CliRunner().invoke(app, list(args), env=env, input=input)
    if isinstance(result.exception, InputError):
        return Ran(2, result.stdout, result.stderr + f"error: {result.exception}\n")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)
