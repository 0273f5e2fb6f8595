"""CI's entry point and the Makefile targets it calls: the script parses, and every test runs in one of them.

CI runs `.ci/run` on a clean clone: `make test`, then `make check-models`. A script that does not parse fails
every CI run before a test starts, and a marker that both targets leave out would drop tests silently.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pytest_args(target: str) -> list[str]:
    """The arguments of the pytest command that `make <target>` runs (make's dry run: nothing is executed)."""
    done = subprocess.run(
        ["make", "-n", "-o", ".venv/.test-installed", "-o", "lint", target],
        cwd=ROOT, capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    (line,) = [line for line in done.stdout.splitlines() if "bin/pytest" in line]
    return shlex.split(line)[1:]


def test_the_ci_script_parses_and_runs_both_targets() -> None:
    script = ROOT / ".ci" / "run"
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    commands = [line.strip() for line in script.read_text(encoding="utf-8").splitlines()]
    assert commands.index("make test") < commands.index("make check-models")


def test_make_test_and_make_check_models_split_the_suite_by_the_rebuild_marker() -> None:
    test, models = _pytest_args("test"), _pytest_args("check-models")
    assert test[test.index("-m") + 1] == "not rebuild"
    assert models[models.index("-m") + 1] == "rebuild"
