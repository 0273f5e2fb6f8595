"""The CLI called in-process, the way the console entry point (`mheval.cli.main`) runs it: an InputError is
exit code 2 with its message on stderr, as `main` prints it. For tests where the subprocess is not what is
tested (tests/test_cli_errors.py keeps the real entry point): no interpreter start-up and no imports per call,
and the offline judge's encoders, once loaded, serve every call."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from mheval.cli import app, input_error_line
from mheval.errors import InputError


@dataclass(frozen=True)
class Ran:
    """What a subprocess.CompletedProcess of `python -m mheval` holds (exit_code is returncode's alias)."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def exit_code(self) -> int:
        return self.returncode

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def mheval(
    *args: str, env: dict[str, str] | None = None, input: str | None = None, cwd: str | Path | None = None
) -> Ran:
    """`mheval ARGS` in this process; `env` entries set for the call (an empty value unsets one)."""
    environ = {k: (v or None) for k, v in (env or {}).items()}
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        result = CliRunner().invoke(app, [os.fspath(a) for a in args], env=environ, input=input)
    if isinstance(result.exception, InputError):
        return Ran(2, result.stdout, result.stderr + input_error_line(result.exception).plain + "\n")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)
