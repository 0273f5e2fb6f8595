"""Is this a run folder's database? Asked before a reading command (gate, summary, report, export, ...) opens it.

Opening a store creates its tables, so a 0-byte `run.db` would quietly become an empty run, and random bytes
fail later as a `sqlite3.DatabaseError` traceback (exit 1, which CI reads as a failed gate). This looks first,
without writing: the file's SQLite header, then, through a read-only connection, the tables every mheval run has.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mheval.errors import InputError

SQLITE_HEADER = b"SQLite format 3\x00"
REQUIRED_TABLES = frozenset({"meta", "cases", "responses", "judgments"})


def _refuse(why: str, run_dir: str | Path) -> InputError:
    return InputError(f"not an mheval run folder ({why})", path=run_dir)


def check_run_db(path: Path, run_dir: str | Path) -> None:
    """Raise InputError unless `path` is an mheval run database; writes nothing, whatever the file holds."""
    if not path.is_file():  # no run here at all (the wording every command has always used), not a damaged one
        raise InputError(f"not a run folder (no {path.name})", path=run_dir)
    try:
        with path.open("rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise _refuse(f"{path.name} cannot be read: {exc.strerror or exc}", run_dir) from None
    if not head:
        raise _refuse(f"{path.name} is empty", run_dir)
    if head != SQLITE_HEADER:
        raise _refuse(f"{path.name} is not a SQLite database", run_dir)
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables >= REQUIRED_TABLES:
                db.execute("SELECT COUNT(*) FROM meta").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise _refuse(f"{path.name} is damaged: {exc}", run_dir) from None
    missing = sorted(REQUIRED_TABLES - tables)
    if missing:
        raise _refuse(f"{path.name} has no {', '.join(missing)} table", run_dir)
