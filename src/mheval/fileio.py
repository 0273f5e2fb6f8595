"""Writing files the user will keep: atomically, never over a run's own files, never over theirs by surprise.

`atomic_write` and `atomic_path` put the bytes in a temporary file beside the target and `os.replace`
it, so a reader (or a crash) never sees half a file. `check_output` is the rule every `--output`
follows: a run folder's own files are never a target, and an existing file is replaced only when
the user said `--overwrite`. `csv_safe` neutralises spreadsheet formulas in CSV cells.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mheval.errors import InputError

# What makes a folder a run folder, and the files in it that only the engine may write.
RUN_DB = "run.db"
REDACTED_FILE = "redacted.jsonl"
"""The masked texts of a `--redact store` run (engine/redacting.py), written by the run alone."""
RUN_OWN_FILES = frozenset(
    {
        RUN_DB,
        f"{RUN_DB}-wal",
        f"{RUN_DB}-shm",
        f"{RUN_DB}-journal",
        "config.yaml",
        ".mheval.lock",
        # Human rating studies (annotate/study.py): the raters' answers, never replaced by an output.
        "studies.db",
        "studies.db-wal",
        "studies.db-shm",
        REDACTED_FILE,
    }
)
# Human labels are the user's input beside the run (reporting/reliability.py reads them).
RUN_OWN_PREFIXES = ("human_labels.",)


def _temp_name(path: Path) -> Path:
    # Hidden, unique per process and call: two writers never share a temporary file.
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path to write to; renamed onto `path` when the block ends without an error."""
    target = Path(path)
    tmp = _temp_name(target)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write `data` (str as UTF-8) to `path` through a temporary file and an atomic rename."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path) as tmp, tmp.open("xb") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())


def is_run_folder(folder: Path) -> bool:
    return (folder / RUN_DB).is_file()


def is_run_own_file(path: Path) -> bool:
    """True for run.db (and its WAL, journal), config.yaml, the lock and human labels of a run folder."""
    name = path.name
    if not (name in RUN_OWN_FILES or name.startswith(RUN_OWN_PREFIXES)):
        return False
    return is_run_folder(path.parent)


def check_output(path: str | Path, *, overwrite: bool, option: str = "--output", make_parents: bool = False) -> Path:
    """Refuse (InputError, exit 2) a target that is a run's own file, a folder, in a missing folder
    (unless `make_parents`), or an existing file without `overwrite`; returns the path. Symlinks are
    followed, so a link to run.db is refused like run.db itself."""
    target = Path(path)
    for candidate in {target, target.resolve()}:
        if is_run_own_file(candidate):
            raise InputError(
                f"{option} names a file of a run folder ({candidate.name}); outputs never replace a "
                "run's own files: write elsewhere",
                path=target,
            )
    if target.is_dir():
        raise InputError(f"{option} names a folder: give a file name", path=target)
    parent = next((p for p in (target.parent, *target.parent.parents) if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise InputError(f"{option}: {parent} is a file, not a folder", path=target)
    if not target.parent.is_dir() and not make_parents:
        raise InputError(f"{option}: the folder {target.parent} does not exist", path=target)
    if target.exists() and not overwrite:
        raise InputError(f"{option}: the file exists; add --overwrite to replace it", path=target)
    return target


def check_outputs(paths: Iterable[Path], *, overwrite: bool, option: str = "--output") -> None:
    """`check_output` for files written beside a main output (they may sit in a folder not made yet)."""
    for path in paths:
        for candidate in {path, path.resolve()}:
            if is_run_own_file(candidate):
                raise InputError(f"{option} would replace a file of a run folder ({candidate.name})", path=path)
        if path.is_dir():
            raise InputError(f"{option} would write over a folder", path=path)
        if path.exists() and not overwrite:
            raise InputError(f"{option} would replace an existing file; add --overwrite to replace it", path=path)


# --------------------------------------------------------------------------- CSV cells

# A cell starting with one of these is read as a formula by spreadsheets (OWASP's list, plus the
# full-width forms some spreadsheets convert, and a leading newline).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "＝", "＋", "－", "＠")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_safe(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula, prefixed with `'`; other values unchanged.

    A text that is just a number (`-3`, `+1.5e3`) is left as it is: a spreadsheet reads it as that number.
    A text that already looks guarded (`'=x`, any run of `'` before a formula) gets one `'` more, so that
    the readers (suites/readers.py), which take one `'` off a guarded cell, give back every text as it was.
    """
    if isinstance(value, str):
        bare = value.lstrip("'")
        if bare.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(bare):
            return "'" + value
    return value


def csv_safe_frame(frame: Any) -> Any:
    """A copy of a DataFrame with every text cell passed through `csv_safe` (number columns untouched)."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    out = frame.copy()
    for col in out.columns:
        # object, "str" (pandas 3) and categorical columns may hold text; number columns cannot
        if not (is_numeric_dtype(out[col]) or is_bool_dtype(out[col])):
            out[col] = out[col].map(csv_safe)
    return out


__all__ = [
    "atomic_path",
    "atomic_write",
    "check_output",
    "check_outputs",
    "csv_safe",
    "csv_safe_frame",
    "is_run_folder",
    "is_run_own_file",
]
