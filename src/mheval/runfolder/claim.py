"""A run folder: one run's identity, written by one process at a time.

- `claim` takes an OS lock (flock) on the folder for the whole of a write; a second process on the same
  folder waits for it (and then finds the work done), and a lock left by a killed process is released by
  the kernel with it, so it never blocks.
- `check_folder` refuses a path that is a file, or a folder that holds something other than a run.
- `check_identity` refuses to merge a different run into a folder: a run may grow (more models, judges,
  protocols, or more cases of the same suite) but a different suite, or a changed set of cases, needs a
  new folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mheval.errors import InputError

LOCK_NAME = ".mheval.lock"
DB_NAME = "run.db"


def check_folder(run_dir: Path) -> None:
    """The path can hold this run: it does not exist, is empty, or already is a run folder."""
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError("--out names a file, not a folder: give a folder for the run", path=run_dir)
    if run_dir.is_dir() and not (run_dir / DB_NAME).is_file():
        visible = [p.name for p in run_dir.iterdir() if p.name != LOCK_NAME]
        if visible:
            raise InputError(
                f"this folder is not a run folder (no {DB_NAME}) and is not empty ({len(visible)} entries): "
                "give a new or empty folder with --out, so nothing in it is overwritten",
                path=run_dir,
            )


@contextlib.contextmanager
def claim(run_dir: Path, on_wait: Callable[[str], None] | None = None, poll_s: float = 0.5) -> Iterator[None]:
    """Hold the folder's write lock for the block; wait while another process holds it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "another process"
                    message = f"{run_dir} is being written by {holder}: waiting for it to finish"
                    (on_wait or _to_stderr)(message)
                    told = True
                time.sleep(poll_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}".encode("ascii"), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def suite_identity(suite_name: str, case_ids: list[str]) -> dict[str, Any]:
    return {"suite": suite_name, "cases": sorted(case_ids)}


def check_identity(stored: dict[str, Any] | None, current: dict[str, Any], run_dir: Path) -> None:
    """Refuse a run that is not this folder's run (see the module docstring)."""
    if not stored:
        return
    if stored["suite"] != current["suite"]:
        raise InputError(
            f"this folder holds a run of suite {stored['suite']!r}, not {current['suite']!r}: "
            "give a new --out for a different suite",
            path=run_dir,
            field="suite",
        )
    old, new = set(stored["cases"]), set(current["cases"])
    if not old <= new:  # more cases of the same suite extend the run; fewer or other cases do not
        gone = sorted(old - new)
        raise InputError(
            f"the suite's cases changed: {len(gone)} case(s) of this run are gone (e.g. {gone[0]!r}). "
            "Give a new --out for the new case set; edited cases under the same ids are redone in place",
            path=run_dir,
            field="suite",
        )
